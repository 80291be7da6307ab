"""LoRA adapters for the compact forward: reading PEFT folders and mixing several adapters in one batch.

Reading (`read_peft_adapter`): a PEFT folder holds `adapter_config.json` and `adapter_model.safetensors`
(only safetensors is read; nothing is ever unpickled). Supported: plain LoRA on any of the attention and
MLP projections (q, k, v, o, gate, up, down), any rank, `use_rslora`. Refused with a clear error: DoRA,
`modules_to_save`, trained biases, per-module rank/alpha patterns, and adapters on embeddings or lm_head.
The scaling (alpha/r, or alpha/sqrt(r) with rsLoRA) is folded into B once at load time.

Mixing (`LoraBatch`): each row of a batch names its adapter (or none). The forward runs the projections in
fused groups that share an input (`LORA_GROUPS`: q/k/v, o, gate/up, down), so the LoRA work is done per
group too: the A matrices of the group's modules and of every adapter in use are stacked along the rank
axis, and their B matrices laid out block-diagonally ([group out, total rank]: module m's rows, adapter a's
rank columns), once (cached while the set in use stays the same). The delta for the whole batch and the
whole group is then two matmuls and a mask:

    y_group = y_group + ((x @ A_cat^T) * mask_BR) @ B_block^T

where mask_BR keeps, for each row, only the rank columns of its own adapter. With one adapter used by every
row the mask is skipped; with no adapter in use there is no LoRA work at all. Four groups per layer make
eight small matmuls instead of fourteen; the zeros of the block layout cost (modules in the group - 1) x
rank extra multiply-adds per output, nothing next to the base matmul.
"""

from __future__ import annotations

import itertools
import json
import math
import os
import re
from collections import OrderedDict
from dataclasses import dataclass, field
from pathlib import Path

import torch

LORA_TARGETS = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")
# Projections the forward runs as one matmul (they read the same input), in output order.
LORA_GROUPS: dict[str, tuple[str, ...]] = {
    "qkv": ("q_proj", "k_proj", "v_proj"),
    "o": ("o_proj",),
    "gate_up": ("gate_proj", "up_proj"),
    "down": ("down_proj",),
}
_KEY = re.compile(
    r"(?:^|\.)layers\.(\d+)\.(?:self_attn|mlp)\.("
    + "|".join(LORA_TARGETS)
    + r")\.lora_([AB])(?:\.[\w-]+)?\.weight$"
)
_uids = itertools.count(1)


class AdapterError(ValueError):
    """An adapter folder that cannot be served (missing files, unsupported features, wrong shapes)."""


@dataclass(frozen=True, eq=False)
class LoraAdapter:
    """One loaded adapter. `weights[(layer, module)] = (A [r, in], B [out, r] already times the scaling)`."""

    name: str
    checkpoint_step: int | None
    rank: int
    scaling: float
    weights: dict[tuple[int, str], tuple[torch.Tensor, torch.Tensor]]
    uid: int = field(default_factory=lambda: next(_uids))


def _checkpoint_step_from(name: str, path: Path) -> int | None:
    """`@N` at the end of the served name, else a folder named by digits (checkpoints/0003), else None."""
    match = re.search(r"@(\d+)$", name)
    if match:
        return int(match.group(1))
    return int(path.name) if path.name.isdigit() else None


def read_peft_adapter(
    name: str,
    path: str | os.PathLike[str],
    *,
    shapes: dict[str, tuple[int, int]],
    num_layers: int,
    dtype: torch.dtype,
    device: torch.device,
    checkpoint_step: int | None = None,
) -> LoraAdapter:
    """Load the PEFT LoRA adapter in folder `path`; `shapes[module] = (in_features, out_features)`."""
    from safetensors.torch import load_file

    folder = Path(path)
    config_file = folder / "adapter_config.json"
    weights_file = folder / "adapter_model.safetensors"
    if not config_file.is_file():
        raise AdapterError(f"{folder}: no adapter_config.json")
    if not weights_file.is_file():
        found = "adapter_model.bin is there but " if (folder / "adapter_model.bin").exists() else ""
        raise AdapterError(f"{folder}: no adapter_model.safetensors ({found}only safetensors are loaded)")
    config = json.loads(config_file.read_text())
    if str(config.get("peft_type", "LORA")).upper() != "LORA":
        raise AdapterError(f"{folder}: peft_type {config.get('peft_type')!r} is not LORA")
    for key, bad in (("use_dora", True), ("modules_to_save", None), ("bias", "none")):
        value = config.get(key, bad if key != "use_dora" else False)
        if (key == "use_dora" and value) or (key != "use_dora" and value not in (bad, [], {})):
            raise AdapterError(f"{folder}: {key}={value!r} is not supported by the built-in engine")
    for key in ("lora_bias", "target_parameters", "trainable_token_indices", "layer_replication"):
        if config.get(key):
            raise AdapterError(f"{folder}: {key}={config[key]!r} is not supported by the built-in engine")
    if config.get("rank_pattern") or config.get("alpha_pattern"):
        raise AdapterError(f"{folder}: rank_pattern/alpha_pattern are not supported by the built-in engine")
    rank = int(config["r"])
    alpha = float(config.get("lora_alpha", rank))
    scaling = alpha / math.sqrt(rank) if config.get("use_rslora") else alpha / rank

    tensors = load_file(str(weights_file), device="cpu")
    parts: dict[tuple[int, str], dict[str, torch.Tensor]] = {}
    for key, tensor in tensors.items():
        match = _KEY.search(key)
        if match is None:
            raise AdapterError(
                f"{folder}: weight {key!r} is not a LoRA weight of {', '.join(LORA_TARGETS)}; "
                "the built-in engine serves only those"
            )
        layer, module, which = int(match.group(1)), match.group(2), match.group(3)
        if layer >= num_layers:
            raise AdapterError(f"{folder}: {key!r} names layer {layer}, the model has {num_layers}")
        parts.setdefault((layer, module), {})[which] = tensor

    weights: dict[tuple[int, str], tuple[torch.Tensor, torch.Tensor]] = {}
    for (layer, module), ab in parts.items():
        if set(ab) != {"A", "B"}:
            raise AdapterError(f"{folder}: layer {layer} {module} lacks lora_{'A' if 'A' not in ab else 'B'}")
        a_RI, b_OR = ab["A"], ab["B"]
        in_features, out_features = shapes[module]
        if a_RI.shape != (rank, in_features) or b_OR.shape != (out_features, rank):
            raise AdapterError(
                f"{folder}: layer {layer} {module}: shapes A{tuple(a_RI.shape)} B{tuple(b_OR.shape)} do not "
                f"match rank {rank} and the model's ({in_features} -> {out_features})"
            )
        weights[(layer, module)] = (
            a_RI.to(device=device, dtype=dtype).contiguous(),
            (b_OR.float() * scaling).to(device=device, dtype=dtype).contiguous(),
        )
    step = checkpoint_step if checkpoint_step is not None else _checkpoint_step_from(name, folder)
    return LoraAdapter(name=name, checkpoint_step=step, rank=rank, scaling=scaling, weights=weights)


@dataclass(frozen=True)
class _Concat:
    """Adapters in use for one group: A_cat [R, in], B_block [group out, R], owner_R (index in use)."""

    a_RI: torch.Tensor
    b_OR: torch.Tensor
    owner_R: torch.Tensor


class LoraBatch:
    """The LoRA deltas of one forward pass (see the module docstring)."""

    def __init__(
        self,
        concats: dict[tuple[int, str], _Concat],
        row_adapter_B: torch.Tensor,
        all_rows_same: bool,
        adapters: list[LoraAdapter] | None = None,
    ) -> None:
        """row_adapter_B: index into `adapters` of each row's adapter (-1: the base model)."""
        self.adapters = adapters or []
        self.row_adapter_B = row_adapter_B
        self.all_rows_same = all_rows_same
        self._concats = concats
        self._row_adapter_B11 = row_adapter_B[:, None, None]
        self._all_rows_same = all_rows_same
        self._masks: dict[int, torch.Tensor] = {}

    def apply(self, layer: int, group: str, x_BTI: torch.Tensor, y_BTO: torch.Tensor) -> torch.Tensor:
        """`y` (the fused output of `group` in `layer`) plus its LoRA delta for every row (in place)."""
        concat = self._concats.get((layer, group))
        if concat is None:
            return y_BTO
        h_BTR = torch.nn.functional.linear(x_BTI, concat.a_RI)
        if not self._all_rows_same:
            key = id(concat.owner_R)
            mask_B1R = self._masks.get(key)
            if mask_B1R is None:
                mask_B1R = (self._row_adapter_B11 == concat.owner_R[None, None, :]).to(h_BTR.dtype)
                self._masks[key] = mask_B1R
            h_BTR = h_BTR * mask_B1R
        # Not a fused addmm_: `y + h B^T` rounds like PEFT's `base(x) + lora_B(lora_A(x))` does in bf16, so
        # served logprobs equal the trainer's reference forward and the canary can stay tight.
        return y_BTO + torch.nn.functional.linear(h_BTR, concat.b_OR)


def block_concat(
    adapters: list[LoraAdapter],
    layer: int,
    group: str,
    out_sizes: dict[str, int],
    owners: dict[tuple[int, ...], torch.Tensor],
) -> _Concat | None:
    """The stacked A and block-diagonal B of `group` in `layer` over `adapters` (None if none targets it)."""
    pieces: list[tuple[int, int, torch.Tensor, torch.Tensor]] = []  # (adapter index, row offset, A, B)
    offset = 0
    for module in LORA_GROUPS[group]:
        for index, adapter in enumerate(adapters):
            ab = adapter.weights.get((layer, module))
            if ab is not None:
                pieces.append((index, offset, ab[0], ab[1]))
        offset += out_sizes[module]
    if not pieces:
        return None
    a_first = pieces[0][2]
    total_rank = sum(a.shape[0] for _, _, a, _ in pieces)
    a_RI = a_first if len(pieces) == 1 else torch.cat([a for _, _, a, _ in pieces], 0)
    b_OR = torch.zeros(offset, total_rank, dtype=a_first.dtype, device=a_first.device)
    owner: list[int] = []
    column = 0
    for index, row, a_ri, b_or in pieces:
        rank = a_ri.shape[0]
        b_OR[row : row + b_or.shape[0], column : column + rank] = b_or
        owner.extend([index] * rank)
        column += rank
    layout = tuple(owner)
    if layout not in owners:  # one tensor per layout, so rows' masks are built once per layout
        owners[layout] = torch.tensor(layout, dtype=torch.int64, device=a_first.device)
    return _Concat(a_RI=a_RI.contiguous(), b_OR=b_OR, owner_R=owners[layout])


class LoraMixer:
    """Builds `LoraBatch`es, caching the stacked weights for the last few sets of adapters in use.

    `out_sizes[module]` is each projection's output size (the row offsets of the block layout).
    """

    def __init__(self, out_sizes: dict[str, int], cache_size: int = 4) -> None:
        self._out_sizes = out_sizes
        self._cache: OrderedDict[tuple[int, ...], dict[tuple[int, str], _Concat]] = OrderedDict()
        self._cache_size = cache_size

    def _concats(self, adapters: list[LoraAdapter]) -> dict[tuple[int, str], _Concat]:
        key = tuple(a.uid for a in adapters)
        cached = self._cache.get(key)
        if cached is not None:
            self._cache.move_to_end(key)
            return cached
        targets = sorted({t for a in adapters for t in a.weights})
        groups = sorted({(layer, g) for layer, m in targets for g, ms in LORA_GROUPS.items() if m in ms})
        concats: dict[tuple[int, str], _Concat] = {}
        owners: dict[tuple[int, ...], torch.Tensor] = {}
        for layer, group in groups:
            concat = block_concat(adapters, layer, group, self._out_sizes, owners)
            if concat is not None:
                concats[(layer, group)] = concat
        self._cache[key] = concats
        while len(self._cache) > self._cache_size:
            self._cache.popitem(last=False)
        return concats

    def batch(self, row_adapters: list[LoraAdapter | None], device: torch.device) -> LoraBatch | None:
        """The LoRA work for rows using `row_adapters` (None: base model), or None when no row uses one."""
        in_use: dict[int, tuple[int, LoraAdapter]] = {}
        for adapter in row_adapters:
            if adapter is not None and adapter.uid not in in_use:
                in_use[adapter.uid] = (len(in_use), adapter)
        if not in_use:
            return None
        adapters = [a for _, a in in_use.values()]
        index_B = torch.tensor(
            [in_use[a.uid][0] if a is not None else -1 for a in row_adapters],
            dtype=torch.int64,
            device=device,
        )
        all_same = len(adapters) == 1 and all(a is not None for a in row_adapters)
        return LoraBatch(self._concats(adapters), index_B, all_same, adapters)
