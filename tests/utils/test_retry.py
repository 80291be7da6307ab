"""retry(): attempts, backoff timing, exhaustion, filtering, sync and async."""

from __future__ import annotations

import asyncio
import importlib
import itertools
import time

import pytest

from art import retry

retry_module = importlib.import_module("art.utils.retry")


def test_sync_retries_with_backoff_then_succeeds(monkeypatch: pytest.MonkeyPatch) -> None:
    sleeps: list[float] = []
    monkeypatch.setattr(retry_module.time, "sleep", sleeps.append)
    calls: list[int] = []
    seen: list[tuple[str, int]] = []

    @retry(max_attempts=4, delay=0.5, backoff_factor=3.0, on_retry=lambda e, n: seen.append((str(e), n)))
    def flaky() -> str:
        calls.append(1)
        if len(calls) < 3:
            raise ConnectionError(f"try {len(calls)}")
        return "ok"

    assert flaky() == "ok"
    assert len(calls) == 3
    assert sleeps == [0.5, 1.5]
    assert seen == [("try 1", 1), ("try 2", 2)]


def test_sync_exhaustion_raises_the_last_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(retry_module.time, "sleep", lambda s: None)
    calls: list[int] = []

    @retry(max_attempts=3)
    def always() -> None:
        calls.append(1)
        raise ValueError(f"fail {len(calls)}")

    with pytest.raises(ValueError, match="fail 3"):
        always()
    assert len(calls) == 3


def test_only_listed_exceptions_are_retried() -> None:
    calls: list[int] = []

    @retry(max_attempts=5, exceptions=(ConnectionError,))
    def wrong_kind() -> None:
        calls.append(1)
        raise KeyError("no retry")

    with pytest.raises(KeyError):
        wrong_kind()
    assert len(calls) == 1


async def test_async_retries_and_really_waits() -> None:
    calls: list[float] = []

    @retry(max_attempts=3, delay=0.05, backoff_factor=2.0)
    async def flaky() -> int:
        calls.append(time.monotonic())
        if len(calls) < 3:
            raise TimeoutError
        return 7

    assert await flaky() == 7
    gaps = [b - a for a, b in itertools.pairwise(calls)]
    assert gaps[0] >= 0.045 and gaps[1] >= 0.095


async def test_async_exhaustion_and_async_on_retry() -> None:
    seen: list[int] = []

    async def note(exc: BaseException, attempt: int) -> None:
        await asyncio.sleep(0)
        seen.append(attempt)

    @retry(max_attempts=2, delay=0.0, on_retry=note)
    async def always() -> None:
        raise RuntimeError("down")

    with pytest.raises(RuntimeError, match="down"):
        await always()
    assert seen == [1]


def test_bad_arguments() -> None:
    with pytest.raises(ValueError):
        retry(max_attempts=0)
