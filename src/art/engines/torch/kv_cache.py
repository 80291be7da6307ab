"""A slot-based KV cache for continuous batching: one row ("slot") per running sequence.

Layout: keys and values are each one tensor [layers, slots, kv_heads, positions, head_dim]. Running
sequences always occupy slots 0..B-1 (the scheduler keeps them compact: when a sequence leaves, the last
one moves into its slot with one copy), so a decode step attends over the plain view
`keys[layer, :B, :, :T]` without gathering anything.

The cache is preallocated but grows on demand, in both dimensions, to powers of two (at least 256
positions, and at least 16 slots, or as many more as fit in `FIRST_BYTES`) capped at `max_slots` and
`max_positions`: memory follows what is actually running rather than `max_num_seqs * max_model_len`, which
for real models would be many GiB. Growing allocates fresh zeroed memory and copies the old contents (only
the positions each running sequence holds, when the caller says which: see `ensure`). On CPU
that memory comes straight from the OS (an anonymous mapping: zero pages, committed only when first written),
so a new cache costs no pass over its bytes and RSS grows with the positions actually written, not the
allocation (torch.zeros wrote all of it: 122 ms for SmolLM2's 32 slots on a 2-core VM, mostly page faults,
before the first token of a burst). Small models start with room for a whole
burst of requests (the first prefill of a burst often admits only the few that have arrived; 32 slots of
SmolLM2 are 180 MiB), large ones with 16 slots. `release` gives it all back when nothing
runs: the service does so before each training step (the step's peak then holds no cache), and the
engine's worker after a few idle seconds (RSS does not keep the largest batch ever served, e.g. an
evaluation's).
"""

from __future__ import annotations

import math
import mmap
from collections.abc import Sequence

import torch

FIRST_BYTES = 256 << 20  # the first allocation may hold more than 16 slots up to this size (see above)
MIN_SLOTS, MIN_POSITIONS = 16, 256


def _grow_to(needed: int, current: int, floor: int, cap: int) -> int:
    size = max(current, floor)
    while size < needed:
        size *= 2
    return min(size, cap)


class SlotKVCache:
    """Keys and values of every running sequence, slot by slot (see the module docstring)."""

    def __init__(
        self,
        *,
        num_layers: int,
        num_kv_heads: int,
        head_dim: int,
        max_slots: int,
        max_positions: int,
        dtype: torch.dtype,
        device: torch.device,
    ) -> None:
        self.num_layers = num_layers
        self.num_kv_heads = num_kv_heads
        self.head_dim = head_dim
        self.max_slots = max_slots
        self.max_positions = max_positions
        self.dtype = dtype
        self.device = device
        self.keys_LSHTD = self._empty(0, 0)
        self.values_LSHTD = self._empty(0, 0)
        per_slot = 2 * num_layers * num_kv_heads * MIN_POSITIONS * head_dim * self.keys_LSHTD.element_size()
        self.min_slots = MIN_SLOTS  # the fewest slots an allocation holds (more for small models)
        while self.min_slots * 2 <= max_slots and self.min_slots * 2 * per_slot <= FIRST_BYTES:
            self.min_slots *= 2

    def _empty(self, slots: int, positions: int) -> torch.Tensor:
        shape = (self.num_layers, slots, self.num_kv_heads, positions, self.head_dim)
        return zeros(shape, self.dtype, self.device)

    @property
    def slots(self) -> int:
        """Allocated slots."""
        return int(self.keys_LSHTD.shape[1])

    @property
    def positions(self) -> int:
        """Allocated positions per slot."""
        return int(self.keys_LSHTD.shape[3])

    def nbytes(self) -> int:
        """Bytes held by keys and values."""
        return 2 * self.keys_LSHTD.numel() * self.keys_LSHTD.element_size()

    def ensure(self, slots: int, positions: int, lengths: Sequence[int] | torch.Tensor | None = None) -> None:
        """Make room for `slots` sequences of up to `positions` tokens each, keeping the contents.

        `lengths[i]`: positions of slot i that hold data (slots past the list hold none). When given,
        growing copies only those, so the new mapping commits memory only where sequences are: copying
        the whole old extent would write its zeros too, and commit every slot up to the longest one's
        length (one 8k-token prompt beside 23 short rollouts: 24 x 8k positions, 8.4 GiB for SmolLM2 in
        float32). None: copy everything. A tensor is read only when the cache grows (no device sync per
        call)."""
        if slots > self.max_slots or positions > self.max_positions:
            raise ValueError(
                f"KV cache request ({slots} slots x {positions} positions) exceeds its limits "
                f"({self.max_slots} x {self.max_positions})"
            )
        if slots <= self.slots and positions <= self.positions:
            return
        new_slots = _grow_to(slots, self.slots, self.min_slots, self.max_slots)
        new_positions = _grow_to(positions, self.positions, MIN_POSITIONS, self.max_positions)
        for name in ("keys_LSHTD", "values_LSHTD"):
            old = getattr(self, name)
            new = self._empty(new_slots, new_positions)
            if lengths is None:
                new[:, : old.shape[1], :, : old.shape[3]] = old
            else:
                if isinstance(lengths, torch.Tensor):
                    lengths = [int(n) for n in lengths.tolist()]
                for slot, length in enumerate(lengths[: old.shape[1]]):
                    if length > 0:
                        new[:, slot, :, :length] = old[:, slot, :, :length]
            setattr(self, name, new)

    def release(self) -> int:
        """Drop every slot and position (the next `ensure` allocates again); returns the bytes let go."""
        released = self.nbytes()
        self.keys_LSHTD = self._empty(0, 0)
        self.values_LSHTD = self._empty(0, 0)
        return released

    def move(self, src: int, dst: int, length: int) -> None:
        """Copy the first `length` positions of slot `src` into slot `dst` (all layers)."""
        if src == dst or length <= 0:
            return
        self.keys_LSHTD[:, dst, :, :length] = self.keys_LSHTD[:, src, :, :length]
        self.values_LSHTD[:, dst, :, :length] = self.values_LSHTD[:, src, :, :length]

    def share(self, src: int, dst: list[int], length: int) -> None:
        """Copy the first `length` positions of slot `src` into every slot in `dst` (all layers, one copy)."""
        if length <= 0 or not dst:
            return
        if src in dst:
            raise ValueError(f"share copies slot {src} to other slots; got it among the destinations {dst}")
        index = torch.tensor(dst, dtype=torch.int64, device=self.device)
        for cache in (self.keys_LSHTD, self.values_LSHTD):
            cache[:, index, :, :length] = cache[:, src : src + 1, :, :length]


def zeros(shape: tuple[int, ...], dtype: torch.dtype, device: torch.device) -> torch.Tensor:
    """A zero tensor; on CPU, from a fresh anonymous mapping (`mmap`), whose pages the OS supplies zeroed when
    they are first touched: no pass over the bytes now, no RSS for the ones never written. The tensor keeps
    the mapping alive and it is unmapped with the tensor's last reference."""
    count = math.prod(shape)
    size = count * torch.empty(0, dtype=dtype).element_size()
    if device.type != "cpu" or size < mmap.PAGESIZE:
        return torch.zeros(shape, dtype=dtype, device=device)
    return torch.frombuffer(mmap.mmap(-1, size), dtype=dtype, count=count).view(shape)
