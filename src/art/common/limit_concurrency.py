"""`limit_concurrency(n)`: at most `n` calls of an async function run at once (per key, if given).

    @limit_concurrency(4)
    async def call_judge(prompt: str) -> str: ...

    @limit_concurrency(2, derive_key=lambda user, *_: user)   # 2 at once per user
    async def fetch(user: str, url: str) -> bytes: ...

The reference's helper. Semaphores are made lazily, in the event loop of the first call of each key.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Awaitable, Callable
from typing import ParamSpec, TypeVar

P = ParamSpec("P")
R = TypeVar("R")


def limit_concurrency(
    n: int, derive_key: Callable[..., str] | None = None
) -> Callable[[Callable[P, Awaitable[R]]], Callable[P, Awaitable[R]]]:
    """Decorate an async function so that at most `n` of its calls (with the same `derive_key(*args,
    **kwargs)`, if given) run at once; the others wait their turn.

    Example:
        @limit_concurrency(4, derive_key=lambda model, scenario: model.name)
        async def rollout(model: art.Model, scenario: Scenario) -> art.Trajectory: ...
    """
    if n < 1:
        raise ValueError(f"limit_concurrency(n): n must be at least 1, got {n}")

    def decorator(func: Callable[P, Awaitable[R]]) -> Callable[P, Awaitable[R]]:
        semaphores: dict[str, asyncio.Semaphore] = {}

        @functools.wraps(func)
        async def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
            key = derive_key(*args, **kwargs) if derive_key is not None else "default"
            semaphore = semaphores.get(key)
            if semaphore is None:
                semaphore = semaphores[key] = asyncio.Semaphore(n)
            async with semaphore:
                return await func(*args, **kwargs)

        return wrapper

    return decorator
