"""`trajectory_group_batches`: groups handed out in batches as they finish, while later ones keep running.

    async for batch in art.trajectory_group_batches(
        (art.TrajectoryGroup(rollout(model, s) for _ in range(8)) for s in scenarios),
        batch_size=4, max_concurrent_batches=2,
    ):
        result = await backend.train(model, batch)
        await model.log(batch, metrics=result.metrics, step=result.step, split="train")

The reference's helper for pipelined training: up to `batch_size * max_concurrent_batches` groups run at
once; each batch holds the first `batch_size` groups to finish (in finishing order), the last batch what
is left. Rollouts of later groups keep running while the caller trains on a batch, so they may come from
the step before (slightly off-policy, as in the reference). `skip_batches` skips the first groups (resume
after a restart). A group whose awaitable fails is dropped; failed rollouts inside groups stay in the
group's `exceptions`. More failed rollouts in one batch than `max_batch_exceptions` (a count, or a fraction
of the batch's rollouts when between 0 and 1) stops everything with `TooManyExceptions`.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import AsyncIterator, Awaitable, Iterable

from tqdm import tqdm

from art.rollout.gather import TooManyExceptions
from art.trajectories import Trajectory, TrajectoryGroup, rollout_observer


class _BatchBudget:
    """Counts the rollouts of the current batch (reset when a batch is handed out)."""

    def __init__(self, max_exceptions: int | float) -> None:
        if isinstance(max_exceptions, bool) or max_exceptions < 0:
            raise ValueError(f"max_batch_exceptions must be a number >= 0, got {max_exceptions!r}")
        self.max_exceptions = max_exceptions
        self.reset()

    def reset(self) -> None:
        self.trajectories = 0
        self.exceptions: list[BaseException] = []

    def record_trajectory(self, trajectory: Trajectory) -> None:
        self.trajectories += 1

    def record_exception(self, exc: BaseException) -> None:
        self.exceptions.append(exc)

    def exceeded(self) -> bool:
        allowed = self.max_exceptions
        if 0 < allowed < 1:
            allowed *= max(self.trajectories + len(self.exceptions), 1)
        return len(self.exceptions) > allowed


def _discard(awaitable: Awaitable[TrajectoryGroup]) -> None:
    """Close coroutines that will never be awaited (a group's rollouts too), so Python does not warn."""
    inner = awaitable._awaitables if isinstance(awaitable, TrajectoryGroup) else [awaitable]
    for item in inner:
        if inspect.iscoroutine(item):
            item.close()


async def _run_group(awaitable: Awaitable[TrajectoryGroup], budget: _BatchBudget) -> TrajectoryGroup | None:
    if isinstance(awaitable, TrajectoryGroup):
        return await awaitable  # its rollouts report to the budget one by one
    try:
        group = await awaitable
    except Exception as exc:
        budget.record_exception(exc)
        return None
    if not isinstance(group, TrajectoryGroup):
        raise TypeError(f"expected an awaitable of art.TrajectoryGroup, got {type(group).__name__}")
    for trajectory in group.trajectories:
        budget.record_trajectory(trajectory)
    return group


async def trajectory_group_batches(
    groups: Iterable[Awaitable[TrajectoryGroup]],
    *,
    batch_size: int,
    max_batch_exceptions: int | float = 0,
    max_concurrent_batches: int = 4,
    skip_batches: int = 0,
    pbar_desc: str | None = "batches",
    pbar_total_completion_tokens: bool = False,
) -> AsyncIterator[list[TrajectoryGroup]]:
    """Yield lists of `batch_size` finished groups (the last one may be shorter); see the module doc.

    Example:
        async for groups in art.trajectory_group_batches(pending_groups, batch_size=4):
            await model.train(groups, config=art.TrainConfig(learning_rate=1e-5))
    """
    if batch_size < 1 or max_concurrent_batches < 1 or skip_batches < 0:
        raise ValueError("batch_size and max_concurrent_batches must be >= 1, skip_batches >= 0")
    if pbar_total_completion_tokens:
        print("pbar_total_completion_tokens is deprecated and has no effect.")
    budget = _BatchBudget(max_batch_exceptions)
    all_groups = list(groups)
    skipped, unstarted = all_groups[: batch_size * skip_batches], all_groups[batch_size * skip_batches :]
    for awaitable in skipped:
        _discard(awaitable)
    unstarted.reverse()  # pop() from the end takes them in order
    pending: set[asyncio.Task[TrajectoryGroup | None]] = set()
    batch: list[TrajectoryGroup] = []
    pbar = tqdm(total=batch_size, desc=pbar_desc, disable=pbar_desc is None, unit="group")
    try:
        while unstarted or pending:
            token = rollout_observer.set(budget)
            try:
                while unstarted and len(pending) < batch_size * max_concurrent_batches:
                    pending.add(asyncio.ensure_future(_run_group(unstarted.pop(), budget)))
            finally:
                rollout_observer.reset(token)  # the tasks copied the context when created
            done, pending = await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
            for task in done:
                group = task.result()  # a TypeError from a wrong awaitable propagates
                if group is not None:
                    batch.append(group)
                pbar.update(1)
            if budget.exceeded():
                first = budget.exceptions[0]
                raise TooManyExceptions(
                    f"{len(budget.exceptions)} rollouts of this batch failed, more than max_batch_exceptions="
                    f"{max_batch_exceptions} allows; the first failure is shown above"
                ) from first
            while len(batch) >= batch_size:
                ready, batch = batch[:batch_size], batch[batch_size:]
                budget.reset()
                pbar.reset(total=batch_size)
                yield ready
        if batch:
            yield batch
    finally:
        pbar.close()
        for task in pending:
            task.cancel()
        for awaitable in unstarted:
            _discard(awaitable)
