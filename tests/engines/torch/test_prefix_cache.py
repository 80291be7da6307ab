"""The prefix cache keeps finished sequences' keys and values, finds the longest shared start, evicts LRU."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from art.engines.torch.kv_cache import SlotKVCache  # noqa: E402
from art.engines.torch.prefix_cache import MIN_REUSE_TOKENS, PrefixCache  # noqa: E402


def _cache() -> SlotKVCache:
    cache = SlotKVCache(
        num_layers=2,
        num_kv_heads=1,
        head_dim=4,
        max_slots=4,
        max_positions=128,
        dtype=torch.float32,
        device=torch.device("cpu"),
    )
    cache.ensure(4, 64)
    cache.keys_LSHTD.copy_(torch.randn_like(cache.keys_LSHTD))
    cache.values_LSHTD.copy_(torch.randn_like(cache.values_LSHTD))
    return cache


def test_match_restores_the_longest_shared_start_of_the_same_adapter() -> None:
    cache = _cache()
    store = PrefixCache(max_entries=4)
    a = list(range(40))
    b = [*range(30), *range(500, 520)]
    store.retain(cache, 0, a, adapter_uid=7)
    store.retain(cache, 1, b, adapter_uid=7)
    entry, n = store.match([*range(35), 999], adapter_uid=7)
    assert (entry, n) == (0, 35)  # a shares 35 tokens, b only 30
    assert store.match(a, adapter_uid=7)[1] == 39  # the prompt's last token always runs
    assert store.match([*range(35), 999], adapter_uid=8) == (-1, 0)  # another adapter's keys differ
    assert store.match([*range(MIN_REUSE_TOKENS - 1), 999], adapter_uid=7) == (-1, 0)  # too short
    store.restore(entry, n, cache, 3)
    for kv in (cache.keys_LSHTD, cache.values_LSHTD):
        assert torch.equal(kv[:, 3, :, :n], kv[:, 0, :, :n])
    assert store.reused_tokens == 35


def test_a_continuation_replaces_its_predecessor_and_the_least_recently_used_goes_first() -> None:
    cache = _cache()
    store = PrefixCache(max_entries=2)
    turn1 = list(range(20))
    store.retain(cache, 0, turn1, adapter_uid=1)
    store.retain(cache, 1, [*turn1, 50, 51], adapter_uid=1)  # the same conversation, one turn later
    assert len(store) == 1
    other = list(range(100, 130))
    store.retain(cache, 2, other, adapter_uid=1)
    store.restore(*store.match([*turn1, 50, 51, 52], adapter_uid=1), cache, 3)  # turn1's entry used last
    store.retain(cache, 3, list(range(200, 230)), adapter_uid=1)  # full: evicts `other`
    assert store.match([*other, 1], adapter_uid=1) == (-1, 0)
    assert store.match([*turn1, 50, 51, 52], adapter_uid=1)[1] == 22
    assert store.nbytes() > 0 and store.clear() > 0 and len(store) == 0 and store.nbytes() == 0


def test_short_sequences_and_a_zero_size_store_keep_nothing() -> None:
    cache = _cache()
    PrefixCache(max_entries=0).retain(cache, 0, list(range(40)), adapter_uid=1)
    store = PrefixCache(max_entries=2)
    store.retain(cache, 0, list(range(MIN_REUSE_TOKENS - 1)), adapter_uid=1)
    assert len(store) == 0
    with pytest.raises(ValueError, match="max_entries"):
        PrefixCache(max_entries=-1)
    with pytest.raises(ValueError, match="does not hold"):
        store.restore(0, 5, cache, 1)


def test_entries_hold_exactly_their_length_within_the_byte_budget() -> None:
    cache = _cache()
    per_token = 2 * 2 * 1 * 4 * 4  # keys and values x layers x kv heads x head dim x float32 bytes
    store = PrefixCache(max_entries=8, max_bytes=50 * per_token)
    store.retain(cache, 0, list(range(20)), adapter_uid=1)
    assert store.nbytes() == 20 * per_token
    store.retain(cache, 1, list(range(100, 125)), adapter_uid=1)
    store.retain(cache, 2, list(range(200, 220)), adapter_uid=1)  # 65 tokens > 50: the oldest goes
    assert len(store) == 2 and store.nbytes() == 45 * per_token
    assert store.match([*range(20), 5], adapter_uid=1) == (-1, 0)
    store.retain(cache, 3, list(range(300, 360)), adapter_uid=1)  # larger than the whole budget: not kept
    assert len(store) == 2
