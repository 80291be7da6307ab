"""The callables a `PipelineTrainer` takes: group rollouts, single rollouts, evaluations."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, TypeAlias, TypeVar

from art.trajectories import Trajectory, TrajectoryGroup

if TYPE_CHECKING:
    from art.model import TrainableModel

ScenarioT = TypeVar("ScenarioT", bound=dict[str, Any])
ConfigT = TypeVar("ConfigT")

RolloutFn: TypeAlias = Callable[["TrainableModel", ScenarioT, ConfigT], Awaitable[TrajectoryGroup]]
"""`await rollout_fn(model, scenario, config)`: one group of trajectories for one scenario."""

SingleRolloutFn: TypeAlias = Callable[["TrainableModel", ScenarioT, ConfigT], Awaitable[Trajectory]]
"""`await single_rollout_fn(model, scenario, config)`: one trajectory (`make_group_rollout_fn` groups them)."""

EvalFn: TypeAlias = Callable[
    ["TrainableModel", int, ConfigT],
    Awaitable[list[Trajectory | TrajectoryGroup] | dict[str, list[Trajectory | TrajectoryGroup]]],
]
"""`await eval_fn(model, step, config)`: trajectories or groups logged as split "val", or a dict of splits."""

__all__ = ["ConfigT", "EvalFn", "RolloutFn", "ScenarioT", "SingleRolloutFn"]
