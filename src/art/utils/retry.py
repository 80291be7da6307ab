"""`retry`: a decorator that re-runs a sync or async function on failure with exponential backoff."""

from __future__ import annotations

import asyncio
import functools
import inspect
import time
from collections.abc import Callable
from typing import Any, ParamSpec, TypeVar, cast

P = ParamSpec("P")
R = TypeVar("R")
OnRetry = Callable[[BaseException, int], Any]


def retry(
    max_attempts: int = 3,
    delay: float = 0.25,
    backoff_factor: float = 2.0,
    exceptions: tuple[type[BaseException], ...] = (Exception,),
    on_retry: OnRetry | None = None,
) -> Callable[[Callable[P, R]], Callable[P, R]]:
    """Retry the decorated function up to `max_attempts` times in all.

    After failed attempt k (1-based) it waits `delay * backoff_factor**(k-1)` seconds, calling
    `on_retry(exception, k)` first (it may be async for async functions). Only `exceptions` are retried;
    anything else, and the last failure, propagate unchanged.

    Example:
        >>> calls = []
        >>> @art.retry(max_attempts=3, delay=0)
        ... def flaky() -> str:
        ...     calls.append(1)
        ...     if len(calls) < 3:
        ...         raise ConnectionError("try again")
        ...     return "ok"
        >>> (flaky(), len(calls))
        ('ok', 3)
    """
    if max_attempts < 1:
        raise ValueError(f"max_attempts must be >= 1, got {max_attempts}")
    if delay < 0 or backoff_factor < 1:
        raise ValueError("delay must be >= 0 and backoff_factor >= 1")

    def wait_for(attempt: int) -> float:
        return float(delay * backoff_factor ** (attempt - 1))

    def decorate(fn: Callable[P, R]) -> Callable[P, R]:
        if inspect.iscoroutinefunction(fn):

            @functools.wraps(fn)
            async def async_wrapper(*args: P.args, **kwargs: P.kwargs) -> Any:
                for attempt in range(1, max_attempts + 1):
                    try:
                        return await fn(*args, **kwargs)
                    except exceptions as exc:
                        if attempt == max_attempts:
                            raise
                        if on_retry is not None:
                            result = on_retry(exc, attempt)
                            if inspect.isawaitable(result):
                                await result
                        await asyncio.sleep(wait_for(attempt))
                raise AssertionError("unreachable")

            return cast(Callable[P, R], async_wrapper)

        @functools.wraps(fn)
        def sync_wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
            for attempt in range(1, max_attempts + 1):
                try:
                    return fn(*args, **kwargs)
                except exceptions as exc:
                    if attempt == max_attempts:
                        raise
                    if on_retry is not None:
                        on_retry(exc, attempt)
                    time.sleep(wait_for(attempt))
            raise AssertionError("unreachable")

        return sync_wrapper

    return decorate
