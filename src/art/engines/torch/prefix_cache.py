"""Keys and values of finished sequences, kept for later requests that start with the same tokens.

An agent's next request repeats its whole conversation so far: the previous request's prompt, the reply the
model just generated, and a new message. Without this store, every turn prefills the conversation from
the start again (the tic-tac-toe demo spent ~75% of its rollout time in prefill). When a sequence finishes,
the scheduler `retain`s the positions it has in the KV cache (its prompt and all but the last generated
token); a new prompt then `match`es the entry of the same adapter sharing its longest start, and the
scheduler `restore`s those positions into the new row's slot and prefills only the rest. An entry also
serves any prompt that merely shares its start (the same system prompt and examples).

Each entry holds its own tensors of exactly its length (a pool shaped like the slot cache would round every
entry up to the longest, a power of two: the demo's peak RSS rose 0.85 GiB that way). They are released with
the KV cache (before training steps, when the engine idles). At most `max_entries` entries and `max_bytes`
bytes are kept: a finished sequence replaces the entry it continues (the same conversation one turn
earlier), else the least recently used go until it fits. Keys and values depend on the weights: entries
are per adapter (its unique id), and `clear` drops them all when the base weights change.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from art.engines.torch.kv_cache import SlotKVCache

MIN_REUSE_TOKENS = 16
"""A match shorter than this is not worth a copy and a separate start: the prompt is prefilled in full."""


DEFAULT_MAX_BYTES = 512 * 2**20
"""Memory for kept keys and values (SmolLM2-135M: ~23 KB per token, so ~22k tokens; a 7B model's
~130 KB per token: ~4k)."""


@dataclass(eq=False)
class _Entry:
    tokens: np.ndarray  # int64: the token of every cached position
    adapter_uid: int  # 0: the base model
    used: int  # the store's clock at the last retain or restore (least recently used goes first)
    keys_LHTD: torch.Tensor  # [layers, kv heads, len(tokens), head dim]
    values_LHTD: torch.Tensor

    def nbytes(self) -> int:
        return 2 * self.keys_LHTD.numel() * self.keys_LHTD.element_size()


def common_prefix(a: list[int] | np.ndarray, b: list[int] | np.ndarray, limit: int | None = None) -> int:
    """How many leading tokens two token sequences share (at most `limit`)."""
    n = min(len(a), len(b), len(a) if limit is None else limit)
    if n <= 0:
        return 0
    differ = np.flatnonzero(np.asarray(a[:n]) != np.asarray(b[:n]))
    return int(differ[0]) if len(differ) else n


class PrefixCache:
    """Finished sequences' keys and values for later prompts that start the same way (see the module docstring)."""

    def __init__(self, *, max_entries: int, max_bytes: int = DEFAULT_MAX_BYTES) -> None:
        if max_entries < 0 or max_bytes < 0:
            raise ValueError(f"max_entries and max_bytes must be >= 0; got {max_entries}, {max_bytes}")
        self.max_entries = max_entries
        self.max_bytes = max_bytes
        self.entries: list[_Entry] = []
        self._clock = 0
        self.reused_tokens = 0  # positions restored instead of prefilled, since the start (benchmarks)

    def __len__(self) -> int:
        return len(self.entries)

    def retain(self, cache: SlotKVCache, slot: int, tokens: list[int], adapter_uid: int) -> None:
        """Keep slot `slot`'s first len(tokens) positions of `cache`, whose tokens they are."""
        n = len(tokens)
        size = (
            2 * cache.num_layers * cache.num_kv_heads * n * cache.head_dim * cache.keys_LSHTD.element_size()
        )
        if self.max_entries == 0 or n < MIN_REUSE_TOKENS or size > self.max_bytes:
            return
        kept = np.asarray(tokens, dtype=np.int64)
        self.entries = [  # an entry this one continues (or repeats) is superseded by it
            e
            for e in self.entries
            if not (e.adapter_uid == adapter_uid and common_prefix(e.tokens, kept) == len(e.tokens))
        ]
        while self.entries and (
            len(self.entries) >= self.max_entries or self.nbytes() + size > self.max_bytes
        ):
            self.entries.remove(min(self.entries, key=lambda e: e.used))
        self._clock += 1
        keys = cache.keys_LSHTD[:, slot, :, :n].clone()
        values = cache.values_LSHTD[:, slot, :, :n].clone()
        self.entries.append(_Entry(kept, adapter_uid, self._clock, keys, values))

    def match(self, prompt: list[int] | np.ndarray, adapter_uid: int) -> tuple[int, int]:
        """(entry, positions to restore) for the entry of this adapter sharing the longest start with the
        prompt, at most len(prompt) - 1 (the prompt's last token must run: its logits start generation);
        (-1, 0) when none shares MIN_REUSE_TOKENS."""
        query = np.asarray(prompt, dtype=np.int64)
        best, best_len = -1, 0
        for i, e in enumerate(self.entries):
            if e.adapter_uid == adapter_uid:
                n = min(common_prefix(e.tokens, query), len(query) - 1)
                if n > best_len:
                    best, best_len = i, n
        return (best, best_len) if best_len >= MIN_REUSE_TOKENS else (-1, 0)

    def restore(self, index: int, length: int, cache: SlotKVCache, slot: int) -> None:
        """Copy entry `index`'s first `length` positions into `cache`'s slot `slot`."""
        if not 0 <= index < len(self.entries) or length > len(self.entries[index].tokens):
            raise ValueError(f"prefix cache entry {index} does not hold {length} positions")
        entry = self.entries[index]
        cache.keys_LSHTD[:, slot, :, :length] = entry.keys_LHTD[:, :, :length]
        cache.values_LSHTD[:, slot, :, :length] = entry.values_LHTD[:, :, :length]
        self._clock += 1
        entry.used = self._clock
        self.reused_tokens += length

    def clear(self) -> int:
        """Drop every entry; returns the bytes let go."""
        released = self.nbytes()
        self.entries = []
        return released

    def nbytes(self) -> int:
        """Bytes held by the entries' keys and values."""
        return sum(e.nbytes() for e in self.entries)
