"""Experiment-tracking hooks: Weights & Biases, Weave, Langfuse. Each lives in its own module and extra.

`Model(report_metrics=[...])` names the trackers a model reports to; `None` (the default) means W&B when
`WANDB_API_KEY` is set, as in the reference. `Model.register` calls `on_register` and `Model.log` calls
`on_log` after the row is safely in `history.jsonl`; both import a tracker's module (and its package) only
when that tracker is on, so `import art` loads none of them.

- "wandb" (`art[wandb]`, integrations/wandb.py): one run per model, every logged row with
  `training_step` as the x-axis, metrics in the reference's sections, trajectories as a table.
- "weave" (`art[weave]`, integrations/weave.py): `weave.init(project)` at registration, so rollouts
  decorated with `@weave.op` are traced into the model's project.
- "langfuse" (`art[langfuse]`, integrations/langfuse.py): one Langfuse trace per logged trajectory,
  scored with its reward.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import sys
import warnings
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from art.integrations.tracked import TrackedModel
    from art.trajectories import TrajectoryGroup

# tracker name -> the module it needs
PACKAGES = {"wandb": "wandb", "weave": "weave", "langfuse": "langfuse"}


def install_command(tracker: str) -> str:
    """The pip command that installs what a tracker needs.

    Example:
        >>> install_command("wandb")
        "pip install 'agent-reinforcement-trainer[wandb]'"
    """
    return f"pip install 'agent-reinforcement-trainer[{tracker}]'"


def check_report_metrics(value: Sequence[str] | None) -> list[str] | None:
    """Validate `report_metrics`: known tracker names whose packages are installed (ValueError otherwise).

    >>> check_report_metrics(None) is None
    True
    """
    if value is None:
        return None
    names = list(value)
    for name in names:
        if name not in PACKAGES:
            # The reference accepts any name (a tracker of the user's own may read `report_metrics`).
            warnings.warn(
                f"report_metrics: ART reports to no tracker named {name!r} (it knows "
                f"{', '.join(sorted(PACKAGES))}); it is kept and ignored here",
                stacklevel=4,
            )
            continue
        if not _installed(PACKAGES[name]):
            raise ValueError(
                f"report_metrics asks for {name!r}, but the {PACKAGES[name]} package is not installed: "
                f"{install_command(name)}"
            )
    return names


_warned_default = False


def active_trackers(report_metrics: Sequence[str] | None) -> list[str]:
    """The trackers to report to: the list given, or W&B when `WANDB_API_KEY` is set and wandb installed.

    Example:
        >>> active_trackers(["langfuse"])
        ['langfuse']
    """
    global _warned_default
    if report_metrics is not None:
        return [name for name in report_metrics if name in PACKAGES]
    if "WANDB_API_KEY" not in os.environ:
        return []
    if not _installed(PACKAGES["wandb"]):
        if not _warned_default:
            _warned_default = True
            warnings.warn(
                f"WANDB_API_KEY is set but wandb is not installed, so nothing is reported to W&B: "
                f"{install_command('wandb')} (or pass report_metrics=[] to silence this)",
                stacklevel=3,
            )
        return []
    return ["wandb"]


def _installed(package: str) -> bool:
    """Whether `package` can be imported (one already in `sys.modules`, even without a spec, counts)."""
    if package in sys.modules:
        return sys.modules[package] is not None
    try:
        return importlib.util.find_spec(package) is not None
    except (ImportError, ValueError):
        return False


def wandb_run(model: TrackedModel) -> Any:
    """The model's W&B run, started now if none is open; None when W&B is not one of its trackers.

    Example:
        run = wandb_run(model)  # what `model._get_wandb_run()` returns
    """
    if "wandb" not in active_trackers(model.report_metrics):
        return None
    return _tracker("wandb").get_run(model)


def _tracker(name: str) -> Any:
    return importlib.import_module(f".{name}", __name__)


def on_register(model: TrackedModel) -> None:
    """Tell the model's trackers that it was registered (Weave starts tracing here).

    Example:
        on_register(model)  # what `await model.register(backend)` calls once registered
    """
    for name in active_trackers(model.report_metrics):
        _tracker(name).on_register(model)


def on_log(
    model: TrackedModel, split: str, step: int, row: dict[str, float], groups: Sequence[TrajectoryGroup]
) -> None:
    """Report one logged step (its `history.jsonl` row, without "step" and "recorded_at") and its groups.

    Example:
        on_log(model, "val", 3, {"reward": 0.8}, groups)  # what `await model.log(groups)` calls
    """
    for name in active_trackers(model.report_metrics):
        _tracker(name).on_log(model, split, step, row, groups)


def update_wandb_config(model: TrackedModel) -> None:
    """Push the model's W&B config (`model.update_wandb_config`) to its run, if one is open in this process.

    Example:
        update_wandb_config(model)  # what `model.update_wandb_config({...})` calls after merging
    """
    if "wandb" in active_trackers(model.report_metrics):
        _tracker("wandb").update_config(model)
