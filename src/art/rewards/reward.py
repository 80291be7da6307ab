"""A reward is one kind of object: it scores the trajectories of a group.

A hand-written function of one trajectory (`reward_fn`), RULER (`RulerReward`: the judge compares the
rollouts of a group), a label-free shaping signal (a function reward too, e.g. `art.mcp.tool_use_signal`)
and their combinations (`RulerReward() + 0.2 * tool_use_signal`) are all `Reward`s, scored the same way:

    reward = RulerReward("openai/o4-mini", swallow_exceptions=True) + 0.2 * tool_use_signal
    groups = await art.gather_trajectory_groups(pending, after_each=reward.score_group)

`score_group` returns a NEW group whose `reward`s are the score (the input is not modified), or None when
the reward cannot score the group (a judge that is down, with `swallow_exceptions=True`): the gather then
drops it. A sum scores its terms in the order written, each seeing the trajectories as the term before
left them (RULER keeps the rollout's own reward in `metrics["independent_reward"]`), and adds their values.
A term named with `recorded_as(name)` also keeps its value in each trajectory's `metrics[name]`.

Client side only: nothing here imports torch.
"""

from __future__ import annotations

import functools
import inspect
from abc import ABC, abstractmethod
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, overload

from art.rewards.ruler import DEFAULT_JUDGE, DEFAULT_RUBRIC, ruler_score_group
from art.trajectories import Trajectory, TrajectoryGroup

TrajectoryScoreFn = Callable[[Trajectory], float | Awaitable[float]]
"""A hand-written reward or signal: a trajectory's number (a coroutine function works too)."""


class Reward(ABC):
    """What every reward is: `await reward.score_group(group)` gives a new scored group, or None.

    Combine with `+` (the values add) and a number `*` (the value is weighted); `recorded_as(name)` keeps
    a term's value in `metrics[name]`.

    Example:
        total = RulerReward() + 0.2 * reward_fn(lambda t: float(t.metrics.get("solved", 0)))
        scored = await total.score_group(group)
    """

    name: str = "reward"

    @abstractmethod
    async def score_group(self, group: TrajectoryGroup) -> TrajectoryGroup | None:
        """A new group whose trajectories' `reward` is this reward's value; None: this group cannot be
        scored (the caller drops it)."""

    def __add__(self, other: Reward) -> Reward:
        if not isinstance(other, Reward):
            return NotImplemented
        return RewardSum((*_terms(self), *_terms(other)))

    def __mul__(self, weight: float) -> Reward:
        if isinstance(weight, bool) or not isinstance(weight, int | float):
            return NotImplemented
        return WeightedReward(self, float(weight))

    __rmul__ = __mul__

    def recorded_as(self, name: str) -> Reward:
        """This reward, keeping its value in each trajectory's `metrics[name]` as well.

        Example:
            bonus = (0.2 * tool_use_signal).recorded_as("shaping_bonus")
        """
        return RecordedReward(self, name)


def _terms(reward: Reward) -> tuple[Reward, ...]:
    return reward.terms if isinstance(reward, RewardSum) else (reward,)


def _copy(group: TrajectoryGroup) -> TrajectoryGroup:
    return group.model_copy(deep=True)


class FunctionReward(Reward):
    """A hand-written function of one trajectory (or a label-free shaping signal) as a `Reward`.

    Still callable as the function (`signal(trajectory)` gives its number). With `record=True` its value
    is kept in each trajectory's `metrics[name]` too.

    Example:
        @reward_fn
        def solved(trajectory: art.Trajectory) -> float:
            return 1.0 if "42" in trajectory.messages()[-1]["content"] else 0.0
    """

    def __init__(self, fn: TrajectoryScoreFn, *, name: str | None = None, record: bool = False) -> None:
        self.fn = fn
        self.name = name or str(getattr(fn, "__name__", "reward"))
        self.record = record
        functools.update_wrapper(self, fn, assigned=("__doc__", "__module__", "__qualname__"), updated=())

    def __call__(self, trajectory: Trajectory) -> float | Awaitable[float]:
        return self.fn(trajectory)

    async def value(self, trajectory: Trajectory) -> float:
        """The function's number for `trajectory` (awaited if the function is a coroutine function)."""
        result = self.fn(trajectory)
        return float(await result) if inspect.isawaitable(result) else float(result)

    async def score_group(self, group: TrajectoryGroup) -> TrajectoryGroup | None:
        scored = _copy(group)
        for trajectory in scored.trajectories:
            trajectory.reward = await self.value(trajectory)
            if self.record:
                trajectory.metrics[self.name] = trajectory.reward
        return scored

    def __repr__(self) -> str:
        return f"reward_fn({self.name})"


@overload
def reward_fn(fn: TrajectoryScoreFn, *, name: str | None = None, record: bool = False) -> FunctionReward: ...
@overload
def reward_fn(
    fn: None = None, *, name: str | None = None, record: bool = False
) -> Callable[[TrajectoryScoreFn], FunctionReward]: ...
def reward_fn(
    fn: TrajectoryScoreFn | None = None, *, name: str | None = None, record: bool = False
) -> FunctionReward | Callable[[TrajectoryScoreFn], FunctionReward]:
    """A function of one trajectory as a `Reward` (as a decorator, bare or with `name=`/`record=`).

    Example:
        @reward_fn(name="tool_use_signal", record=True)
        def tool_use_signal(trajectory): ...
    """
    if fn is None:
        return lambda f: FunctionReward(f, name=name, record=record)
    return FunctionReward(fn, name=name, record=record)


def as_reward(reward: Reward | TrajectoryScoreFn) -> Reward:
    """`reward` itself, or a plain function of one trajectory wrapped as a `FunctionReward`.

    Example:
        bonus = as_reward(lambda t: 0.1 * float(t.metrics.get("task_completed", 0)))
    """
    return reward if isinstance(reward, Reward) else FunctionReward(reward)


class RulerReward(Reward):
    """RULER as a `Reward`: the judge scores the rollouts of a group against each other
    (`art.rewards.ruler_score_group`, with the same options; `swallow_exceptions=True` gives None for a group
    it cannot score). Each trajectory gets `metrics["ruler_score"]` and keeps its previous reward in
    `metrics["independent_reward"]`.

    Example:
        reward = RulerReward("openai/o4-mini", swallow_exceptions=True)
    """

    name = "ruler_score"

    def __init__(self, judge: Any = DEFAULT_JUDGE, rubric: str = DEFAULT_RUBRIC, **options: Any) -> None:
        self.judge, self.rubric, self.options = judge, rubric, options

    async def score_group(self, group: TrajectoryGroup) -> TrajectoryGroup | None:
        return await ruler_score_group(group, self.judge, rubric=self.rubric, **self.options)

    def __repr__(self) -> str:
        return f"RulerReward({self.judge!r})"


class WeightedReward(Reward):
    """`weight * reward`: the reward's value times `weight` (what the reward records stays unweighted).

    Example:
        half = 0.5 * RulerReward()  # the same as WeightedReward(RulerReward(), 0.5)
    """

    def __init__(self, reward: Reward, weight: float) -> None:
        self.reward, self.weight = reward, weight
        self.name = reward.name

    async def score_group(self, group: TrajectoryGroup) -> TrajectoryGroup | None:
        scored = await self.reward.score_group(group)
        if scored is not None:
            for trajectory in scored.trajectories:
                trajectory.reward *= self.weight
        return scored

    def __repr__(self) -> str:
        return f"{self.weight:g} * {self.reward!r}"


class RecordedReward(Reward):
    """A reward whose value is also kept in each trajectory's `metrics[name]` (`Reward.recorded_as`).

    Example:
        bonus = RecordedReward(0.2 * tool_use_signal, "shaping_bonus")
    """

    def __init__(self, reward: Reward, name: str) -> None:
        self.reward, self.name = reward, name

    async def score_group(self, group: TrajectoryGroup) -> TrajectoryGroup | None:
        scored = await self.reward.score_group(group)
        if scored is not None:
            for trajectory in scored.trajectories:
                trajectory.metrics[self.name] = trajectory.reward
        return scored

    def __repr__(self) -> str:
        return f"{self.reward!r}.recorded_as({self.name!r})"


class RewardSum(Reward):
    """`a + b + ...`: each term scores in turn (seeing the trajectories as the one before left them); the
    reward is the sum of their values. None as soon as one term cannot score the group.

    Example:
        total = RulerReward() + 0.2 * tool_use_signal  # a RewardSum of two terms
    """

    def __init__(self, terms: Sequence[Reward]) -> None:
        if not terms:
            raise ValueError("a sum of rewards needs at least one term")
        self.terms = tuple(terms)
        self.name = " + ".join(t.name for t in self.terms)

    async def score_group(self, group: TrajectoryGroup) -> TrajectoryGroup | None:
        current: TrajectoryGroup | None = group
        totals = [0.0] * len(group.trajectories)
        for term in self.terms:
            assert current is not None
            current = await term.score_group(current)
            if current is None:
                return None
            if len(current.trajectories) != len(totals):
                raise ValueError(
                    f"{term!r} returned {len(current.trajectories)} trajectories for {len(totals)}"
                )
            totals = [total + t.reward for total, t in zip(totals, current.trajectories, strict=True)]
        assert current is not None
        for trajectory, total in zip(current.trajectories, totals, strict=True):
            trajectory.reward = total
        return current

    def __repr__(self) -> str:
        return " + ".join(repr(t) for t in self.terms)
