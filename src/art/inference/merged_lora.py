"""Adapters folded into copies of the base weights, for generation.

A LoRA adapter adds (x A^T) B^T to every targeted projection: with seven projections in four fused groups
that is eight small matmuls per layer, 15-30% of a SmolLM2 decode step on CPU (benchmarks/README.md,
"Rollout profiling"). Generation instead multiplies by W' = W + B A, computed once per adapter in
float32 and rounded once to the model's dtype (then packed for oneDNN where the base weights are): the
same arithmetic up to rounding, and no LoRA work at all.

Every row is computed with the weights of its own adapter whatever else shares the batch (rows of other
adapters, or of the base model, are multiplied separately), so a request's tokens do not depend on who
else is being served. Copies are kept for the adapters used most recently, within a memory budget; the
service's canary scores with the exact LoRA arithmetic (unmerged), like the trainer.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable

import torch

from art.inference.lora import LORA_GROUPS, LoraAdapter

LayerWeights = list[dict[str, torch.Tensor]]  # per layer: group -> weight (packed or plain [out, in])


def merged_group_weight(
    fused_OI: torch.Tensor, adapter: LoraAdapter, layer: int, group: str, out_sizes: dict[str, int]
) -> torch.Tensor:
    """The fused weight of `group` in `layer` with `adapter` folded in: W + B A per module (B already
    carries the scaling), summed in float32 and rounded once to W's dtype. A new tensor; W is untouched."""
    merged_OI = fused_OI.detach().to(torch.float32, copy=True)  # never .float(): a no-op on float32 W
    offset = 0
    for module in LORA_GROUPS[group]:
        rows = out_sizes[module]
        ab = adapter.weights.get((layer, module))
        if ab is not None:
            a_RI, b_OR = ab
            merged_OI[offset : offset + rows].addmm_(b_OR.float(), a_RI.float())
        offset += rows
    return merged_OI.to(fused_OI.dtype)


class MergedAdapters:
    """The merged weight copies of the most recently used adapters, at most `capacity` of them.

    A copy is keyed by the adapter and by `weights_key` (the base weights it was made from), so replacing
    the base weights makes old copies unreachable; they are dropped least recently used first, and at once
    when their adapter is unloaded (`forget`). Three copies cover a batch mixing the newest checkpoints
    with the base model (which needs none); a batch that needs more is served unmerged.
    Thread-safe: the engine's worker builds copies, other threads forget them.
    """

    def __init__(self, copy_bytes: int, max_bytes: int, max_count: int = 3) -> None:
        self.capacity = max(0, min(max_count, max_bytes // max(copy_bytes, 1)))
        self._copies: OrderedDict[tuple[int, tuple[int, ...]], LayerWeights] = OrderedDict()
        self._lock = threading.Lock()

    def get(
        self, adapter: LoraAdapter, weights_key: tuple[int, ...], build: Callable[[], LayerWeights]
    ) -> LayerWeights:
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

    def clear(self) -> None:
        """Drop every copy."""
        with self._lock:
            self._copies.clear()
