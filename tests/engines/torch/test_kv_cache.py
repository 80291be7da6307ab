"""The slot KV cache: how much room an allocation takes, growth keeps the contents, release gives it back."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from art.engines.torch.kv_cache import FIRST_BYTES, SlotKVCache  # noqa: E402


def _cache(layers: int, kv_heads: int, head_dim: int, max_slots: int = 64) -> SlotKVCache:
    return SlotKVCache(
        num_layers=layers, num_kv_heads=kv_heads, head_dim=head_dim, max_slots=max_slots,
        max_positions=4096, dtype=torch.bfloat16, device=torch.device("cpu"),
    )  # fmt: skip


def test_a_small_model_gets_room_for_a_burst_at_once_and_a_large_one_16_slots() -> None:
    small = _cache(layers=30, kv_heads=3, head_dim=64)  # SmolLM2-135M: 32 slots x 256 positions = 180 MiB
    small.ensure(2, 40)
    assert (small.slots, small.positions) == (32, 256) and small.nbytes() <= FIRST_BYTES
    large = _cache(layers=28, kv_heads=4, head_dim=128)  # a 7B model: 16 slots are 224 MiB already
    large.ensure(2, 40)
    assert (large.slots, large.positions) == (16, 256)
    capped = _cache(layers=2, kv_heads=1, head_dim=16, max_slots=8)  # never beyond max_slots
    capped.ensure(1, 10)
    assert capped.slots == 8


def test_growing_keeps_what_is_cached_and_release_gives_everything_back() -> None:
    cache = _cache(layers=2, kv_heads=1, head_dim=16, max_slots=1024)
    cache.min_slots = 16  # as a large model's
    cache.ensure(3, 10)
    first_slots = cache.slots
    cache.keys_LSHTD[:, 2, :, :10] = 1.5
    cache.ensure(first_slots + 1, 300)  # both dimensions grow
    assert cache.slots == 2 * first_slots and cache.positions == 512
    assert bool((cache.keys_LSHTD[:, 2, :, :10] == 1.5).all())
    assert float(cache.keys_LSHTD[:, 2, :, 10:].abs().sum()) == 0.0  # new room is zeros
    assert cache.release() > 0 and cache.nbytes() == 0
    with pytest.raises(ValueError, match="exceeds its limits"):
        cache.ensure(2000, 10)


def _rss_bytes() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * 4096


@pytest.mark.skipif(
    not __import__("os").path.exists("/proc/self/statm"), reason="reads RSS from Linux's /proc"
)
def test_a_new_cache_costs_memory_only_where_it_is_written() -> None:
    """The cache's memory comes zeroed from the OS and is committed page by page as positions are written:
    a 180 MiB allocation adds next to nothing to RSS until used, and reads as zeros."""
    cache = _cache(layers=30, kv_heads=3, head_dim=64)
    before = _rss_bytes()
    cache.ensure(32, 200)
    assert cache.nbytes() >= 150 << 20
    assert _rss_bytes() - before < 16 << 20
    cache.keys_LSHTD[:, 0, :, :10] = 1.0  # one slot's first positions, every layer
    assert _rss_bytes() - before < 32 << 20
    assert cache.keys_LSHTD[:, 1:3].abs().sum() == 0 and cache.values_LSHTD[:, :2].abs().sum() == 0
    cache.ensure(64, 200)  # growing copies what was written
    assert torch.equal(cache.keys_LSHTD[:, 0, :, :10], torch.ones(30, 3, 10, 64, dtype=torch.bfloat16))


@pytest.mark.skipif(
    not __import__("os").path.exists("/proc/self/statm"), reason="reads RSS from Linux's /proc"
)
def test_growing_beside_one_long_sequence_commits_only_what_sequences_hold() -> None:
    """One long prompt among short rollouts stretches every slot to its length; growing then copies only
    the positions each slot holds, so memory follows the tokens, not slots x the longest sequence
    (copying the whole old extent wrote its zeros and committed ~400 MiB here, 8 GiB for real runs)."""
    cache = SlotKVCache(
        num_layers=4, num_kv_heads=3, head_dim=64, max_slots=64, max_positions=8192,
        dtype=torch.float32, device=torch.device("cpu"),
    )  # fmt: skip
    cache.min_slots = 16  # as a large model's, so that 32 slots are allocated first
    lengths = [2000] + [10] * 31  # 6 KiB per position: 12 MiB for the long one, 2 MiB for the rest
    cache.ensure(32, 2001)
    assert (cache.slots, cache.positions) == (32, 2048)
    for slot, length in enumerate(lengths):
        cache.keys_LSHTD[:, slot, :, :length] = slot + 1.0
        cache.values_LSHTD[:, slot, :, :length] = -(slot + 1.0)
    before = _rss_bytes()
    cache.ensure(33, 2001, torch.tensor(lengths))  # a 33rd sequence arrives: the slots double
    assert cache.slots == 64
    assert _rss_bytes() - before < 64 << 20
    for slot, length in enumerate(lengths):
        assert bool((cache.keys_LSHTD[:, slot, :, :length] == slot + 1.0).all())
        assert bool((cache.values_LSHTD[:, slot, :, :length] == -(slot + 1.0)).all())
    assert float(cache.keys_LSHTD[:, 1, :, 10:].abs().sum()) == 0.0
