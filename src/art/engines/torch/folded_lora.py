"""Adapters folded into the base matmul for generation: fewer, larger matmuls, the same numbers.

A LoRA adapter adds (x A^T) B^T to each projection it targets. The unfolded way (`LoraBatch.apply`) is
three extra small ops per fused group (x A^T, h B^T, the add): twelve per layer, which cost 15-30% of a
SmolLM2 decode step on CPU (benchmarks/README.md, "Rollout profiling"). Folded, the adapter's A rows are
appended to the group's base weight, so ONE matmul gives both y = x W^T and h = x A^T; then y + h B^T
in one C++ pass (`cpp_kernels.lora_b_add`; torch ops where it cannot be built). In a decode step the
kernel that consumes each group's output (rope, SwiGLU, residual add + RMSNorm) adds the B product itself
as it reads [y | x A^T] (`FoldedGroup.fused_bt`): one pass, one output and one thread fork fewer per group.
The products are the very same dot products, so the result equals the unfolded arithmetic exactly
(oneDNN computes each output column independently: checked in bf16 by the tests), which is also what
PEFT and the trainer compute. Merging W + B A into one weight would save a little more but rounds the
sum to bf16: measured 0.05 nats of mean logprob error on SmolLM2, as large as a young adapter's whole
effect, so it is not done.

Every row is computed with its own adapter's weights whatever else shares the batch (rows of other
adapters, or of the base model, are multiplied separately), so a request's tokens do not depend on who
else is being served. Folded copies are kept for the most recently used adapters, within a memory budget
(a copy of each targeted group's base weight); they are dropped when their adapter is unloaded.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass

import torch
import torch.nn.functional as F

from art.engines.torch.lora import LORA_GROUPS, LoraAdapter, block_concat
from art.kernels import cpp_kernels, packed_linear


@dataclass(frozen=True)
class FoldedGroup:
    """One fused projection group, for the rows of one adapter (or of the base model).

    weight: [out + R, in] (R = the adapter's rank rows in this group; 0 for the base model or an adapter
    that does not target the group), packed for oneDNN when `packed`; bias: [out + R] or None;
    b_OR: [out, R], the adapter's B blocks (scaling folded in), None when R = 0; bt_RN: its transpose's
    nonzero blocks in float32, for the C++ kernels (`cpp_kernels.LoraBT`), None where they are not used.
    """

    weight: torch.Tensor
    bias: torch.Tensor | None
    out: int
    b_OR: torch.Tensor | None
    packed: bool
    bt_RN: cpp_kernels.LoraBT | None = None
    native_bf16: bool = (
        True  # the C++ kernels may use AVX-512 BF16's conversion (`RuntimeOptions.native_bf16`)
    )

    def extended(self, x: torch.Tensor) -> torch.Tensor:
        """x [..., in] -> [x W^T + bias | x A^T]: [..., out + R], the product before B (`fused_bt`)."""
        if self.packed:
            return packed_linear.linear(x, self.weight, self.bias)
        return F.linear(x, self.weight, self.bias)

    @property
    def fused_bt(self) -> cpp_kernels.LoraBT | None:
        """B^T for a C++ kernel that adds the B product to `extended(x)` as it reads it (`cpp_kernels`,
        `lora_bt` arguments), or None when this group has no B or the C++ kernels are not used."""
        return self.bt_RN

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        """x [..., in] -> x W^T + bias (+ (x A^T) B^T): [..., out]."""
        y = self.extended(x)
        if self.b_OR is None:
            return y
        if self.bt_RN is not None:
            return cpp_kernels.lora_b_add(y, self.bt_RN, native_bf16=self.native_bf16)
        return lora_b_add_torch(y, self.b_OR)


def lora_b_add_torch(y: torch.Tensor, b_OR: torch.Tensor) -> torch.Tensor:
    """y[..., :out] + y[..., out:] B^T with torch ops: PEFT's `y + lora_B(h)`, op for op."""
    out = b_OR.shape[0]
    return y[..., :out] + F.linear(y[..., out:].contiguous(), b_OR)


LayerGroups = list[dict[str, FoldedGroup]]  # per layer: group name -> its weights


def base_group(weight: torch.Tensor, bias_O: torch.Tensor | None, *, packed: bool) -> FoldedGroup:
    """A group of the base model: its (possibly packed) weight as is, no adapter rows."""
    return FoldedGroup(weight, bias_O, int(weight.shape[0]), None, packed)


def fold_group(
    base: FoldedGroup,
    fused_OI: torch.Tensor,
    bias_O: torch.Tensor | None,
    adapter: LoraAdapter,
    layer: int,
    group: str,
    out_sizes: dict[str, int],
    *,
    native_bf16: bool = True,
) -> FoldedGroup:
    """The weights of `group` in `layer` for rows of `adapter`; `base` itself when it does not target
    the group (shared, no copy). `fused_OI`/`bias_O`: the group's plain base weight and bias; `native_bf16`:
    as the C++ kernels run (`RuntimeOptions.native_bf16`)."""
    concat = block_concat([adapter], layer, group, out_sizes, {})
    if concat is None:
        return base
    out, pack = int(fused_OI.shape[0]), base.packed
    with torch.no_grad():
        extended = torch.cat([fused_OI.detach(), concat.a_RI.to(fused_OI.dtype)], 0)
        bias = None
        if bias_O is not None:
            bias = torch.cat([bias_O.detach(), bias_O.new_zeros(concat.a_RI.shape[0])])
    weight = packed_linear.pack(extended) if pack else extended
    b_OR = concat.b_OR.to(fused_OI.dtype).contiguous()
    fast = cpp_kernels.usable(b_OR.dtype, b_OR.device, out, native_bf16=native_bf16)
    bt_RN = cpp_kernels.float_lora_bt(b_OR) if fast else None
    return FoldedGroup(weight, bias, out, b_OR, pack, bt_RN, native_bf16)


class FoldedAdapters:
    """The folded weights of the most recently used adapters, at most `capacity` of them.

    Keyed by the adapter and by `weights_key` (the base weights they were made from), so replacing the base
    weights makes old copies unreachable; least recently used go first, and at once when their adapter is
    unloaded (`forget`). Three cover a batch mixing the newest checkpoints with the base model (which needs
    none); a batch that needs more is served unfolded. Thread-safe: the engine's worker builds copies,
    other threads forget them.
    """

    def __init__(self, copy_bytes: int, max_bytes: int, max_count: int = 3) -> None:
        self.capacity = max(0, min(max_count, max_bytes // max(copy_bytes, 1)))
        self._copies: OrderedDict[tuple[int, tuple[int, ...]], LayerGroups] = OrderedDict()
        self._lock = threading.Lock()

    def get(
        self, adapter: LoraAdapter, weights_key: tuple[int, ...], build: Callable[[], LayerGroups]
    ) -> LayerGroups:
        """The copy for `adapter`, built (evicting the oldest beyond capacity first) if it is missing."""
        key = (adapter.uid, weights_key)
        with self._lock:
            copy = self._copies.get(key)
            if copy is not None:
                self._copies.move_to_end(key)
                return copy
            while self._copies and len(self._copies) >= self.capacity:
                self._copies.popitem(last=False)  # free before building the next one
        copy = build()
        with self._lock:
            self._copies[key] = copy
        return copy

    def forget(self, adapter: LoraAdapter) -> None:
        """Drop the copies of `adapter` (it was unloaded or replaced)."""
        with self._lock:
            for key in [k for k in self._copies if k[0] == adapter.uid]:
                del self._copies[key]

    def __len__(self) -> int:
        return len(self._copies)


def fold_layers(
    base: LayerGroups,
    fused: list[dict[str, torch.Tensor]],
    biases: list[dict[str, torch.Tensor | None]],
    adapter: LoraAdapter,
    out_sizes: dict[str, int],
    native_bf16: bool = True,
) -> LayerGroups:
    """`fold_group` for every layer and group."""
    return [
        {
            g: fold_group(
                base[i][g], fused[i][g], biases[i][g], adapter, i, g, out_sizes, native_bf16=native_bf16
            )
            for g in LORA_GROUPS
        }
        for i in range(len(fused))
    ]
