"""Running many rollouts at once: concurrency, a progress bar, and the exception budget.

`gather_trajectory_groups` awaits groups (each itself running its rollouts concurrently), shows one tqdm
bar over all rollouts with the running mean reward and the number of failed rollouts, and stops everything
once more rollouts failed than `max_exceptions` allows (a count, or a fraction of all rollouts when between
0 and 1), raising the failure that exceeded it, its own exception with its traceback (as the reference;
a note says the count). Failures within the budget stay recorded in
their group's `exceptions`.

For code that builds its own gather on the reference's pieces: `GatherContext` (a bar, metric sums, an
exception budget), `set_gather_context` / `get_gather_context`, `wrap_group_awaitable`,
`wrap_trajectories_awaitable` and `record_metrics`, with the reference's behaviour.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import math
from collections import Counter
from collections.abc import Awaitable, Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any, NoReturn, TypeVar, cast, overload

from openai.types.chat.chat_completion import Choice
from tqdm import tqdm

from art.trajectories import Trajectory, TrajectoryGroup, is_trainable_choice, rollout_observer

T = TypeVar("T")
AfterEach = Callable[[TrajectoryGroup], Awaitable[TrajectoryGroup | list[TrajectoryGroup] | None]]


class TooManyExceptions(RuntimeError):
    """Raised by `art.trajectory_group_batches` when a batch's failed rollouts exceed its
    `max_batch_exceptions` (chained from the first failure). `gather_trajectory_groups` and
    `gather_trajectories` raise the rollout's own exception instead, as the reference does.

    Example:
        try:
            async for batch in art.trajectory_group_batches(groups, batch_size=4, max_batch_exceptions=1):
                ...
        except art.TooManyExceptions as error:
            print("rollouts keep failing:", error.__cause__)
    """


def _check_budget(max_exceptions: int | float) -> None:
    if not isinstance(max_exceptions, int | float) or isinstance(max_exceptions, bool):
        raise TypeError("max_exceptions must be a number: a count (>= 1) or a fraction between 0 and 1")
    if max_exceptions < 0 or math.isnan(max_exceptions):
        raise ValueError(f"max_exceptions must be >= 0, got {max_exceptions}")


class GatherProgress:
    """Counts rollouts as they finish, drives the progress bar, and enforces the exception budget (what
    `gather_trajectory_groups` and `gather_trajectories` use; `GatherContext` is the reference's API)."""

    def __init__(self, total: int, max_exceptions: int | float, desc: str | None, leave: bool = True) -> None:
        _check_budget(max_exceptions)
        self.total = total
        self.max_exceptions = max_exceptions
        self.reward_sum = 0.0
        self.num_trajectories = 0
        self.exceptions: list[BaseException] = []
        self._recorded: set[int] = set()
        self.exceeded = asyncio.Event()
        self.over_budget: BaseException | None = None
        self.pbar = tqdm(
            total=total, desc=desc, disable=desc is None, unit="rollout", dynamic_ncols=True, leave=leave
        )

    def allowed(self) -> float:
        """How many failed rollouts are tolerated (a fraction applies to the rollouts known so far)."""
        if 0 < self.max_exceptions < 1:
            return self.max_exceptions * max(self.total, 1)
        return self.max_exceptions

    def _seen(self) -> None:
        # Rollouts of groups whose size was unknown up front (plain coroutines) grow the total.
        done = self.num_trajectories + len(self.exceptions)
        if done > self.total:
            self.total = done
            self.pbar.total = done

    def record_trajectory(self, trajectory: Trajectory) -> None:
        if id(trajectory) in self._recorded:  # a group awaited inside an opaque coroutine reported it
            return
        self._recorded.add(id(trajectory))
        self.num_trajectories += 1
        self._seen()
        self.reward_sum += trajectory.reward
        self._tick()

    def record_exception(self, exc: BaseException) -> None:
        self.exceptions.append(exc)
        self._seen()
        if len(self.exceptions) > self.allowed() and not self.exceeded.is_set():
            self.over_budget = exc  # the failure that exceeded the budget: raised as it is
            self.exceeded.set()
        self._tick()

    def _tick(self) -> None:
        # The postfix first: `update` may redraw the bar, and must show the reward that includes this rollout
        # (the other order drew the last line twice, at 100%, with two different rewards).
        postfix: dict[str, float | int] = {"exceptions": len(self.exceptions)}
        if self.num_trajectories:
            postfix = {"reward": round(self.reward_sum / self.num_trajectories, 4), **postfix}
        self.pbar.set_postfix(postfix, refresh=False)
        self.pbar.update(1)

    def raise_too_many(self) -> NoReturn:
        """Raise the rollout's own exception that exceeded the budget (as the reference does, so code that
        catches its rollout's errors still does), with a note that says why it was not kept."""
        failure = self.over_budget or self.exceptions[-1]
        failure.add_note(
            f"ART: {len(self.exceptions)} of {self.total} rollouts failed, more than max_exceptions="
            f"{self.max_exceptions} allows; this failure exceeded it (the first: {self.exceptions[0]!r}). Fix "
            "the rollout, or raise max_exceptions (a count, or a fraction such as 0.1) to tolerate failures."
        )
        raise failure

    def close(self) -> None:
        self.pbar.close()


async def _race_budget(context: GatherProgress, tasks: list[asyncio.Task[T]]) -> list[T]:
    """Await all tasks unless the exception budget is exceeded first (then cancel the rest and raise)."""
    if not tasks:
        return []
    watcher = asyncio.ensure_future(context.exceeded.wait())
    try:
        pending: set[asyncio.Future[Any]] = set(tasks)
        while pending:
            done, pending = await asyncio.wait(pending | {watcher}, return_when=asyncio.FIRST_COMPLETED)
            if watcher in done or context.exceeded.is_set():
                for task in tasks:
                    task.cancel()
                await asyncio.gather(*tasks, return_exceptions=True)
                context.raise_too_many()
            pending.discard(watcher)
            for finished in done:
                if finished is not watcher and finished.exception() is not None:
                    for other in tasks:
                        other.cancel()
                    raise finished.exception()  # type: ignore[misc]
        return [task.result() for task in tasks]
    finally:
        watcher.cancel()


async def gather_trajectory_groups(
    groups: Iterable[Awaitable[TrajectoryGroup]],
    *,
    pbar_desc: str | None = "gather",
    max_exceptions: int | float = 0,
    after_each: AfterEach | None = None,
    pbar_total_completion_tokens: bool = False,
    max_metrics: int | None = None,
    pbar_leave: bool = True,
) -> list[TrajectoryGroup]:
    """Await every group concurrently and return them in input order.

    `after_each(group)` runs as soon as a group finishes: return a group to replace it, None to drop it,
    or a list to split it. Rollout failures are kept in each group's `exceptions` while their number
    stays within `max_exceptions`; past it, the rollout's own exception that exceeded it is raised (as
    in the reference), with a note giving the count, and the other rollouts are cancelled.
    A `pbar_desc` of None hides the progress bar; `pbar_leave=False` clears it when done (for callers that
    print their own summary line). `pbar_total_completion_tokens` (deprecated in the
    reference) and `max_metrics` (the reference's cap on metrics in the bar; ours shows two) are accepted
    and change nothing.

    Example:
        groups = await art.gather_trajectory_groups(
            (art.TrajectoryGroup(rollout(model, s) for _ in range(8)) for s in batch.items),
            max_exceptions=2,
        )
        await model.train(groups, config=art.TrainConfig(learning_rate=1e-5))
    """
    if pbar_total_completion_tokens:
        print("pbar_total_completion_tokens is deprecated and has no effect.")
    del max_metrics  # the bar shows the mean reward and the failure count only
    group_list = list(groups)
    total = sum(g.num_pending if isinstance(g, TrajectoryGroup) else 0 for g in group_list)
    context = GatherProgress(total, max_exceptions, pbar_desc, leave=pbar_leave)

    async def run(group: Awaitable[TrajectoryGroup]) -> list[TrajectoryGroup]:
        if isinstance(group, TrajectoryGroup):
            result = await group  # its rollouts report to the context one by one
        else:
            # An opaque awaitable (e.g. a coroutine that builds a group): count it when it finishes.
            try:
                result = await group
            except Exception as exc:
                context.record_exception(exc)
                return []
            if not isinstance(result, TrajectoryGroup):
                raise TypeError(f"expected an awaitable of art.TrajectoryGroup, got {type(result).__name__}")
            for trajectory in result.trajectories:
                context.record_trajectory(trajectory)
        if after_each is None:
            return [result]
        replaced = await after_each(result)
        if replaced is None:
            return []
        return list(replaced) if isinstance(replaced, list) else [replaced]

    token = rollout_observer.set(context)
    try:
        tasks = [asyncio.ensure_future(run(g)) for g in group_list]
    finally:
        rollout_observer.reset(token)  # tasks copied the context when created
    try:
        results = await _race_budget(context, tasks)
    finally:
        context.close()
    return [g for parts in results for g in parts]


@overload
async def gather_trajectories(
    trajectories: Iterable[Awaitable[Trajectory]],
    *,
    pbar_desc: str | None = "gather",
    max_exceptions: int | float = 0,
    pbar_total_completion_tokens: bool = False,
) -> list[Trajectory | BaseException]: ...


@overload
async def gather_trajectories(
    trajectories: Iterable[Awaitable[Iterable[Trajectory]]],
    *,
    pbar_desc: str | None = "gather",
    max_exceptions: int | float = 0,
    pbar_total_completion_tokens: bool = False,
) -> list[list[Trajectory] | BaseException]: ...


async def gather_trajectories(
    trajectories: Iterable[Awaitable[Trajectory]] | Iterable[Awaitable[Iterable[Trajectory]]],
    *,
    pbar_desc: str | None = "gather",
    max_exceptions: int | float = 0,
    pbar_total_completion_tokens: bool = False,
) -> list[Any]:  # what the overloads above say, by the kind of rollout
    """Await rollouts concurrently; returns them in input order, failed ones as their exception.

    A rollout may return one trajectory, or several (any iterable of them, e.g. one per agent of a
    multi-agent episode): then its place holds their list, and the bar counts each trajectory.
    With the default `max_exceptions=0` any failure raises; otherwise failures within the budget are
    returned in place (check with `isinstance(x, BaseException)`). `pbar_total_completion_tokens`
    (deprecated in the reference) is accepted and changes nothing.

    Example:
        results = await art.gather_trajectories((rollout(model, s) for s in scenarios), max_exceptions=2)
        trajectories = [r for r in results if not isinstance(r, BaseException)]
    """
    if pbar_total_completion_tokens:
        print("pbar_total_completion_tokens is deprecated and has no effect.")
    items: list[Awaitable[Any]] = list(trajectories)
    context = GatherProgress(len(items), max_exceptions, pbar_desc)

    async def one(awaitable: Awaitable[Any]) -> Trajectory | list[Trajectory] | BaseException:
        try:
            result = await awaitable
        except Exception as exc:
            context.record_exception(exc)
            return exc
        if isinstance(result, Trajectory):
            context.record_trajectory(result)
            return result
        several = (
            list(result) if isinstance(result, Iterable) and not isinstance(result, str | bytes) else None
        )
        if several is None or not all(isinstance(t, Trajectory) for t in several):
            wrong = TypeError(
                f"a rollout returned {type(result).__name__}, expected art.Trajectory or a list of them"
            )
            context.record_exception(wrong)
            return wrong
        for trajectory in several:
            context.record_trajectory(trajectory)
        return several

    tasks = [asyncio.ensure_future(one(a)) for a in items]
    try:
        return await _race_budget(context, tasks)
    finally:
        context.close()


# ---- the reference's building blocks -------------------------------------------------------------------
@dataclass
class GatherContext:
    """The reference's gather state for hand-made gathers: a tqdm bar (or None), running metric sums, and an
    exception budget (`max_exceptions`: a count, or a fraction of the bar's total between 0 and 1).

    Set it with `set_gather_context`; `wrap_group_awaitable` / `wrap_trajectories_awaitable` then add each
    finished rollout's reward and metrics to it, move the bar, and raise once failures exceed the budget.
    An `art.TrajectoryGroup` awaited under it reports its rollouts one by one.

    Example:
        context = GatherContext(pbar=None, max_exceptions=2)
        with set_gather_context(context):
            results = await asyncio.gather(*(wrap_group_awaitable(play(s)) for s in scenarios))
        print(context.metric_sums["reward"] / context.metric_divisors["reward"])
    """

    pbar: Any = None
    metric_sums: Counter[str] = field(default_factory=Counter)
    metric_divisors: Counter[str] = field(default_factory=Counter)
    max_metrics: int | None = None
    max_exceptions: int | float = 0
    increment_pbar: bool = True

    def update_pbar(self, n: int) -> None:
        """Move the bar by `n` (when `increment_pbar`) and show the running mean of each metric."""
        if self.pbar is None:
            return
        if self.increment_pbar:
            self.pbar.update(n)
        names = list(self.metric_sums)
        if self.max_metrics is not None:
            names = names[: self.max_metrics]
        postfix = {name: self.metric_sums[name] / max(1, self.metric_divisors[name]) for name in names}
        if "completion_tokens" in postfix:  # last, as in the reference
            postfix["completion_tokens"] = postfix.pop("completion_tokens")
        self.pbar.set_postfix(postfix)

    def too_many_exceptions(self) -> bool:
        """Whether the failures so far (`metric_sums["exceptions"]`) exceed `max_exceptions`."""
        failures = self.metric_sums["exceptions"]
        total = getattr(self.pbar, "total", None)
        if 0 < self.max_exceptions < 1 and total:
            return bool(failures / float(total) > self.max_exceptions)
        return failures > self.max_exceptions

    def reset(self) -> None:
        """Forget the bar, the sums and the budget."""
        self.pbar = None
        self.metric_sums = Counter()
        self.metric_divisors = Counter()
        self.max_exceptions = 0

    # as a rollout observer: an awaited `art.TrajectoryGroup` reports each finished rollout here
    def record_trajectory(self, trajectory: Trajectory) -> None:
        record_metrics(self, trajectory)
        self.update_pbar(n=1)

    def record_exception(self, exc: BaseException) -> None:
        self.metric_sums["exceptions"] += 1
        self.update_pbar(n=0)


_gather_context: contextvars.ContextVar[GatherContext | None] = contextvars.ContextVar(
    "art_gather_context", default=None
)


@contextlib.contextmanager
def set_gather_context(context: GatherContext) -> Iterator[None]:
    """Make `context` the one `get_gather_context()` returns (and the one awaited groups report to) inside
    the block.

    Example:
        with set_gather_context(GatherContext(max_exceptions=1)):
            group = await wrap_group_awaitable(rollouts())
    """
    token = _gather_context.set(context)
    observer = rollout_observer.set(context)
    try:
        yield
    finally:
        rollout_observer.reset(observer)
        _gather_context.reset(token)


def get_gather_context() -> GatherContext:
    """The context set by the innermost `set_gather_context`, or a fresh empty one (no bar, no budget).

    Example:
        get_gather_context().metric_sums["reward"]
    """
    context = _gather_context.get()
    if context is None:
        context = GatherContext()
        _gather_context.set(context)
    return context


def record_metrics(context: GatherContext, trajectory: Trajectory) -> None:
    """Add a finished trajectory's reward and metrics to the context's sums (and, as in the reference, set
    its `completion_tokens` metric: sampled tokens per trainable turn).

    Example:
        record_metrics(context, trajectory)
    """
    sampled = [
        len(item.logprobs.content or [])
        for item in trajectory.messages_and_choices
        if isinstance(item, Choice) and is_trainable_choice(item) and item.logprobs is not None
    ]
    if sampled:
        trajectory.metrics["completion_tokens"] = sum(sampled) / len(sampled)
    sums = cast("dict[str, float]", context.metric_sums)  # a Counter of floats, as in the reference
    for name, value in (("reward", trajectory.reward), *trajectory.metrics.items()):
        sums[name] = sums.get(name, 0) + float(value)
        context.metric_divisors[name] += 1


async def wrap_group_awaitable(awaitable: Awaitable[Any]) -> Any:
    """Await a group (or any awaitable of trajectories) under the current `GatherContext`: its rollouts are
    counted; a failure is counted and gives None, or is raised once failures exceed the budget.

    Example:
        with set_gather_context(GatherContext(max_exceptions=1)):
            groups = await asyncio.gather(*(wrap_group_awaitable(g) for g in pending_groups))
    """
    if isinstance(awaitable, TrajectoryGroup):
        return await awaitable  # its rollouts report to the context one by one
    context = get_gather_context()
    try:
        group = await awaitable
    except BaseException:
        context.metric_sums["exceptions"] += 1
        context.update_pbar(n=0)
        if context.too_many_exceptions():
            raise
        return None
    for trajectory in group:
        record_metrics(context, trajectory)
    context.update_pbar(n=len(group))
    return group


async def wrap_trajectories_awaitable(
    awaitable: Awaitable[Trajectory] | Awaitable[Iterable[Trajectory]],
) -> Trajectory | list[Trajectory] | BaseException:
    """Await one rollout (a trajectory, or several) under the current `GatherContext`; a failure within the
    budget is returned as its exception, past it raised.

    Example:
        with set_gather_context(GatherContext(max_exceptions=0.1)):
            results = await asyncio.gather(*(wrap_trajectories_awaitable(rollout(s)) for s in scenarios))
    """
    context = get_gather_context()
    try:
        result = await awaitable
    except BaseException as exc:
        context.metric_sums["exceptions"] += 1
        context.update_pbar(n=0)
        if context.too_many_exceptions():
            raise
        return exc
    if isinstance(result, Trajectory):
        record_metrics(context, result)
        context.update_pbar(n=1)
        return result
    trajectories = list(result)
    for trajectory in trajectories:
        record_metrics(context, trajectory)
    context.update_pbar(n=1)
    return trajectories
