"""Weave: trace rollouts decorated with `@weave.op` into the model's W&B project.

Weave records calls of `@weave.op` functions once `weave.init(project)` has run. With "weave" in
`report_metrics`, ART runs it when the model is registered (and, for a model that is only logged, at its
first logged step), once per project per process, with call links not printed (as the reference does).
Decorate the rollout yourself::

    @weave.op
    async def rollout(model: art.Model, scenario: Scenario) -> art.Trajectory: ...

Every call is then a trace in Weave, with its inputs and the returned trajectory.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from art.integrations.tracked import TrackedModel
    from art.trajectories import TrajectoryGroup

_initialised: set[str] = set()


def project_name(model: TrackedModel) -> str:
    """The Weave project of a model: `entity/project`, or `project` (the default entity)."""
    return f"{model.entity}/{model.project}" if model.entity else model.project


def on_register(model: TrackedModel) -> None:
    """Start Weave for the model's project (once per project per process)."""
    name = project_name(model)
    if name in _initialised:
        return
    import weave

    weave.init(name, settings={"print_call_link": False})
    _initialised.add(name)


def on_log(
    model: TrackedModel, split: str, step: int, row: dict[str, float], groups: Sequence[TrajectoryGroup]
) -> None:
    """Make sure Weave is started (the traces themselves come from `@weave.op`)."""
    on_register(model)
