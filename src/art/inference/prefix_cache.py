"""Keys and values of finished sequences, kept for later requests that start with the same tokens.

An agent's next request repeats its whole conversation so far: the previous request's prompt, the reply the
model just generated, and a new message. Without this store, every turn prefills the conversation from
the start again (the tic-tac-toe demo spent ~75% of its rollout time in prefill). When a sequence finishes,
the scheduler `retain`s the positions it has in the KV cache (its prompt and all but the last generated
token); a new prompt then `match`es the entry of the same adapter sharing its longest start, and the
scheduler `restore`s those positions into the new row's slot and prefills only the rest. An entry also
serves any prompt that merely shares its start (the same system prompt and examples).

Entries live in a pool laid out like the running batch's cache (`SlotKVCache`, one pool slot per entry),
grown on demand and released with it (before training steps, when the engine idles). At most `max_entries`
are kept: a finished sequence replaces the entry it continues (the same conversation one turn earlier),
else a free one, else the least recently used. Keys and values depend on the weights: entries are
per adapter (its unique id), and `clear` drops them all when the base weights change.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from art.inference.kv_cache import SlotKVCache

MIN_REUSE_TOKENS = 16
"""A match shorter than this is not worth a copy and a separate start: the prompt is prefilled in full."""


@dataclass
class _Entry:
    tokens: np.ndarray  # int64: the token of every cached position
    adapter_uid: int  # 0: the base model
    used: int  # the store's clock at the last retain or restore (least recently used goes first)


def common_prefix(a: np.ndarray, b: np.ndarray) -> int:
    """How many leading tokens two int64 arrays share."""
    n = min(len(a), len(b))
    if n == 0:
        return 0
    differ = np.flatnonzero(a[:n] != b[:n])
    return int(differ[0]) if len(differ) else n


class PrefixCache:
    """Finished sequences' keys and values for later prompts that start the same way (see the module docstring)."""

    def __init__(self, template: SlotKVCache, *, max_entries: int) -> None:
        if max_entries < 0:
            raise ValueError(f"max_entries must be >= 0; got {max_entries}")
        self.max_entries = max_entries
        self.pool = SlotKVCache(
            num_layers=template.num_layers,
            num_kv_heads=template.num_kv_heads,
            head_dim=template.head_dim,
            max_slots=max(max_entries, 1),
            max_positions=template.max_positions,
            dtype=template.dtype,
            device=template.device,
        )
        self.entries: list[_Entry | None] = [None] * max_entries
        self._clock = 0
        self.reused_tokens = 0  # positions restored instead of prefilled, since the start (benchmarks)

    def __len__(self) -> int:
        return sum(e is not None for e in self.entries)

    def retain(self, cache: SlotKVCache, slot: int, tokens: list[int], adapter_uid: int) -> None:
        """Keep slot `slot`'s first len(tokens) positions of `cache`, whose tokens they are."""
        if self.max_entries == 0 or len(tokens) < MIN_REUSE_TOKENS:
            return
        kept = np.asarray(tokens, dtype=np.int64)
        index = self._victim(kept, adapter_uid)
        self.pool.ensure(index + 1, len(kept))
        n = len(kept)
        for src, dst in (
            (cache.keys_LSHTD, self.pool.keys_LSHTD),
            (cache.values_LSHTD, self.pool.values_LSHTD),
        ):
            dst[:, index, :, :n] = src[:, slot, :, :n]
        self._clock += 1
        self.entries[index] = _Entry(kept, adapter_uid, self._clock)

    def _victim(self, tokens: np.ndarray, adapter_uid: int) -> int:
        """The entry a new one replaces: one it continues (or an equal one), else a free one, else the LRU."""
        free = None
        for i, e in enumerate(self.entries):
            if e is None:
                free = i if free is None else free
            elif e.adapter_uid == adapter_uid and common_prefix(e.tokens, tokens) == len(e.tokens):
                return i
        if free is not None:
            return free
        return min(range(self.max_entries), key=lambda i: self.entries[i].used)  # type: ignore[union-attr]

    def match(self, prompt: list[int] | np.ndarray, adapter_uid: int) -> tuple[int, int]:
        """(entry, positions to restore) for the entry of this adapter sharing the longest start with the
        prompt, at most len(prompt) - 1 (the prompt's last token must run: its logits start generation);
        (-1, 0) when none shares MIN_REUSE_TOKENS."""
        query = np.asarray(prompt, dtype=np.int64)
        best, best_len = -1, 0
        for i, e in enumerate(self.entries):
            if e is not None and e.adapter_uid == adapter_uid:
                n = min(common_prefix(e.tokens, query), len(query) - 1)
                if n > best_len:
                    best, best_len = i, n
        return (best, best_len) if best_len >= MIN_REUSE_TOKENS else (-1, 0)

    def restore(self, index: int, length: int, cache: SlotKVCache, slot: int) -> None:
        """Copy entry `index`'s first `length` positions into `cache`'s slot `slot`."""
        entry = self.entries[index]
        if entry is None or length > len(entry.tokens):
            raise ValueError(f"prefix cache entry {index} does not hold {length} positions")
        for src, dst in (
            (self.pool.keys_LSHTD, cache.keys_LSHTD),
            (self.pool.values_LSHTD, cache.values_LSHTD),
        ):
            dst[:, slot, :, :length] = src[:, index, :, :length]
        self._clock += 1
        entry.used = self._clock
        self.reused_tokens += length

    def clear(self) -> int:
        """Drop every entry and the pool's memory; returns the bytes let go."""
        self.entries = [None] * self.max_entries
        return self.pool.release()

    def nbytes(self) -> int:
        """Bytes held by the pool."""
        return self.pool.nbytes()
