"""After a training step the allocator's free memory goes back to the OS only when the machine is short of it."""

from __future__ import annotations

import pytest

from art.kernels import allocator

GIB = 2**30


@pytest.fixture
def trims(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Count calls of malloc_trim instead of making them."""
    calls: list[int] = []
    monkeypatch.setattr(allocator, "release_freed_memory", lambda: calls.append(1))
    return calls


def _memory(monkeypatch: pytest.MonkeyPatch, held: int | None, available: int | None) -> None:
    monkeypatch.setattr(allocator, "held_free_bytes", lambda: held)
    monkeypatch.setattr(allocator, "available_bytes", lambda: available)


def test_memory_is_kept_while_the_machine_has_plenty(
    monkeypatch: pytest.MonkeyPatch, trims: list[int]
) -> None:
    _memory(monkeypatch, held=2 * GIB, available=18 * GIB)  # a SmolLM2 step on a 24 GiB machine
    assert allocator.release_if_short() is False
    assert trims == []


def test_memory_is_released_when_it_is_a_large_share(
    monkeypatch: pytest.MonkeyPatch, trims: list[int]
) -> None:
    _memory(monkeypatch, held=2 * GIB, available=3 * GIB)  # a laptop: 2 of 5 GiB would be ours, idle
    assert allocator.release_if_short() is True
    assert trims == [1]


def test_unknown_amounts_mean_release(monkeypatch: pytest.MonkeyPatch, trims: list[int]) -> None:
    _memory(monkeypatch, held=None, available=18 * GIB)
    assert allocator.release_if_short() is True
    _memory(monkeypatch, held=GIB, available=None)
    assert allocator.release_if_short() is True
    assert trims == [1, 1]


def test_the_setting_overrides_the_choice(monkeypatch: pytest.MonkeyPatch, trims: list[int]) -> None:
    _memory(monkeypatch, held=2 * GIB, available=18 * GIB)
    assert allocator.release_if_short("always") is True
    _memory(monkeypatch, held=2 * GIB, available=1 * GIB)
    assert allocator.release_if_short("never") is False
    assert trims == [1]
    with pytest.raises(ValueError, match=r"'sometimes'.*auto, always, never"):
        allocator.release_if_short("sometimes")


@pytest.mark.skipif(allocator._glibc() is None, reason="glibc's mallinfo2 and /proc/meminfo")
def test_the_real_amounts_are_read_on_linux() -> None:
    available = allocator.available_bytes()
    assert available is not None and available > 0
    if allocator.held_free_bytes() is None:  # glibc older than 2.33
        pytest.skip("no mallinfo2")
    blocks = [bytearray(8192) for _ in range(4000)]  # 32 MiB in blocks glibc keeps in its heap
    before = allocator.held_free_bytes()
    del blocks[::2]  # every other one freed: 16 MiB that cannot merge into memory glibc would unmap at once
    held = allocator.held_free_bytes()
    assert before is not None and held is not None and held - before >= 12 * 2**20
    del blocks
