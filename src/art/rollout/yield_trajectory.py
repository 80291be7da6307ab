"""A trajectory handed out from deep inside a coroutine, for code whose return value is something else.

    async def solve(task: Task) -> str:             # returns the answer, as its callers expect
        trajectory = art.Trajectory(messages_and_choices=[...], reward=0)
        ...
        art.yield_trajectory(trajectory)            # hand the trajectory to whoever captures
        return answer

    trajectory = await art.capture_yielded_trajectory(solve(task))

The reference's pair. The last `yield_trajectory` call inside the capture wins; none is an error.
Outside a capture `yield_trajectory` does nothing, so the same code also runs uncaptured (e.g. in
production).
"""

from __future__ import annotations

import contextvars
from collections.abc import Coroutine
from typing import Any

from art.trajectories import Trajectory


class _Slot:
    def __init__(self) -> None:
        self.trajectory: Trajectory | None = None


_slot: contextvars.ContextVar[_Slot | None] = contextvars.ContextVar("art_yielded_trajectory", default=None)


def yield_trajectory(trajectory: Trajectory) -> None:
    """Hand `trajectory` to the running `capture_yielded_trajectory` (outside one: nothing happens).

    Example:
        art.yield_trajectory(art.Trajectory(messages_and_choices=messages, reward=reward))
        return answer  # the function's own result is unchanged
    """
    slot = _slot.get()
    if slot is not None:
        slot.trajectory = trajectory


async def capture_yielded_trajectory(coroutine: Coroutine[Any, Any, Any]) -> Trajectory:
    """Run `coroutine` and return the trajectory it yielded last; RuntimeError if it yielded none.

    Example:
        trajectory = await art.capture_yielded_trajectory(solve(task))  # solve calls art.yield_trajectory
    """
    slot = _Slot()
    token = _slot.set(slot)
    try:
        await coroutine
    finally:
        _slot.reset(token)
    if slot.trajectory is None:
        raise RuntimeError("the coroutine finished without calling art.yield_trajectory(trajectory)")
    return slot.trajectory


__all__ = ["capture_yielded_trajectory", "yield_trajectory"]
