"""Waiting in tests for something to happen, with a deadline, instead of sleeping a guessed time.

A test that sleeps 0.05 s and then asserts a state passes on an idle machine and fails on two loaded cores;
one that polls until the state holds (failing with `what` after a generous deadline) fails only when the
state never comes. Use a deadline far past the normal time: it is spent only when the code is broken.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any

DEADLINE_S = 30.0
"""How long a poll waits by default: minutes of margin over anything these tests wait for."""


def wait_until(
    condition: Callable[[], Any], what: str, timeout: float = DEADLINE_S, every: float = 0.01
) -> Any:
    """Poll `condition()` until it is truthy and return it; fail naming `what` after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while not (value := condition()):
        assert time.monotonic() < deadline, f"timed out after {timeout:.0f} s waiting for {what}"
        time.sleep(every)
    return value


async def until(
    condition: Callable[[], Any], what: str, timeout: float = DEADLINE_S, every: float = 0.01
) -> Any:
    """`wait_until` for async tests: polls without blocking the event loop."""
    deadline = time.monotonic() + timeout
    while not (value := condition()):
        assert time.monotonic() < deadline, f"timed out after {timeout:.0f} s waiting for {what}"
        await asyncio.sleep(every)
    return value
