"""The data metrics `Model.log` adds on its own for each step (the reference's `art.metrics_taxonomy`).

For the groups a `train`, `val` or `test` row logs, `summarize_trajectory_groups` counts scenarios,
trajectories (failed rollouts included), groups submitted and groups that can teach (rewards that differ),
and collects the distinct `scenario_id`s found in group or trajectory metadata; `build_data_metrics_from_summary`
turns that into the `data/step_*` keys. `average_metric_samples` averages per-batch metric dicts, keeping
`data/step_num_gradient_steps` as the one value every sample must agree on.

Example:
    summary = summarize_trajectory_groups(groups)
    build_data_metrics_from_summary(summary, include_trainable_groups=True)
    # {'data/step_num_scenarios': 3.0, 'data/step_num_trajectories': 24.0,
    #  'data/step_num_groups_submitted': 3.0, 'data/step_num_groups_trainable': 2.0}
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from art.trajectories import TrajectoryGroup

TRAIN_GRADIENT_STEPS_KEY = "data/step_num_gradient_steps"
# Keys whose samples must all agree (averaging them would hide a bug); `average_metric_samples` checks.
_SAME_IN_EVERY_SAMPLE = frozenset({TRAIN_GRADIENT_STEPS_KEY})

# The reference's row taxonomy: a key whose first component is a section or a split is logged as it is;
# any other key is prefixed by the row's split (`custom` -> `train/custom`, `reward/mean` stays).
METRIC_SECTIONS = frozenset(
    {"reward", "loss", "offpolicy", "pipeline", "throughput", "costs", "time", "data"}
)
METRIC_SPLITS = frozenset({"train", "val", "test"})

# What our trainer calls a step's metrics (`TrainResult.metrics` from the service) -> the reference's
# names, which `backend.train` returns; our other trainer metrics keep their names (`train/ratio_mean`).
TRAINER_METRIC_NAMES = {
    "loss": "loss/train",
    "entropy": "loss/entropy",
    "grad_norm": "loss/grad_norm",
    "learning_rate": "loss/learning_rate",
    "kl": "loss/kl_policy_ref",
    "num_groups": "data/step_num_groups_submitted",
    "trainable_groups": "data/step_num_groups_trainable",
    "num_trajectories": "data/step_num_trajectories",
    "num_assistant_tokens": "data/step_trainer_tokens",
    "step_s": "time/step_trainer_s",
    "num_gradient_steps": TRAIN_GRADIENT_STEPS_KEY,
}

__all__ = [
    "METRIC_SECTIONS",
    "METRIC_SPLITS",
    "TRAINER_METRIC_NAMES",
    "TRAIN_GRADIENT_STEPS_KEY",
    "TrajectoryBatchSummary",
    "average_metric_samples",
    "build_data_metrics_from_summary",
    "build_training_summary_metrics",
    "reference_train_metrics",
    "route_metric_key",
    "summarize_trajectory_groups",
]


def average_metric_samples(metric_samples: Iterable[Mapping[str, float]]) -> dict[str, float]:
    """The mean of each key over the samples that have it; `data/step_num_gradient_steps` is taken as is and
    must be equal in every sample (a `ValueError` names the two values otherwise).

    Example:
        >>> average_metric_samples([{"loss": 1.0}, {"loss": 3.0, "kl": 0.5}])
        {'loss': 2.0, 'kl': 0.5}
    """
    totals: dict[str, float] = {}
    counts: dict[str, int] = {}
    fixed: dict[str, float] = {}
    for sample in metric_samples:
        for key, value in sample.items():
            number = float(value)
            if key in _SAME_IN_EVERY_SAMPLE:
                if key in fixed and fixed[key] != number:
                    raise ValueError(
                        f"metric {key!r} must be invariant across samples (the same in every one), got "
                        f"{fixed[key]} and {number}"
                    )
                fixed[key] = number
            totals[key] = totals.get(key, 0.0) + number
            counts[key] = counts.get(key, 0) + 1
    return {key: fixed.get(key, totals[key] / counts[key]) for key in totals}


@dataclass(frozen=True)
class TrajectoryBatchSummary:
    """What one step's groups hold: counts, and the distinct scenario ids in first-seen order.

    Example:
        >>> TrajectoryBatchSummary(2, 16, 2, 1, ["a", "b"]).num_groups_trainable
        1
    """

    num_scenarios: int
    num_trajectories: int
    num_groups_submitted: int
    num_groups_trainable: int
    scenario_ids: list[str]


def _scenario_id(group: TrajectoryGroup) -> str | None:
    """The group's `scenario_id` (group metadata first, then its trajectories'), as text."""
    for metadata in (group.metadata, *(t.metadata for t in group.trajectories)):
        value = metadata.get("scenario_id") if isinstance(metadata, Mapping) else None
        if value is not None:
            return str(value)
    return None


def _can_teach(group: TrajectoryGroup) -> bool:
    """GRPO learns only from a group whose rewards differ."""
    return len({t.reward for t in group.trajectories}) > 1


def summarize_trajectory_groups(trajectory_groups: Iterable[TrajectoryGroup]) -> TrajectoryBatchSummary:
    """Count the groups of one step (a group is one scenario; failed rollouts count as trajectories).

    Example:
        >>> trajectories = [art.Trajectory(reward=1.0), art.Trajectory(reward=0.0)]
        >>> g = art.TrajectoryGroup(trajectories, metadata={"scenario_id": 7})
        >>> summarize_trajectory_groups([g]).scenario_ids
        ['7']
    """
    groups = list(trajectory_groups)
    ids: list[str] = []
    for group in groups:
        scenario = _scenario_id(group)
        if scenario is not None and scenario not in ids:
            ids.append(scenario)
    return TrajectoryBatchSummary(
        num_scenarios=len(groups),
        num_trajectories=sum(len(g.trajectories) + len(g.exceptions) for g in groups),
        num_groups_submitted=len(groups),
        num_groups_trainable=sum(1 for g in groups if _can_teach(g)),
        scenario_ids=ids,
    )


def build_data_metrics_from_summary(
    summary: TrajectoryBatchSummary, *, include_trainable_groups: bool
) -> dict[str, float]:
    """The `data/step_*` metrics of a summary; `data/step_num_groups_trainable` only when asked (train rows).

    Example:
        >>> s = TrajectoryBatchSummary(2, 16, 2, 1, [])
        >>> build_data_metrics_from_summary(s, include_trainable_groups=False)
        {'data/step_num_scenarios': 2.0, 'data/step_num_trajectories': 16.0, 'data/step_num_groups_submitted': 2.0}
    """
    metrics = {
        "data/step_num_scenarios": float(summary.num_scenarios),
        "data/step_num_trajectories": float(summary.num_trajectories),
        "data/step_num_groups_submitted": float(summary.num_groups_submitted),
    }
    if include_trainable_groups:
        metrics["data/step_num_groups_trainable"] = float(summary.num_groups_trainable)
    return metrics


def build_training_summary_metrics(
    summary: TrajectoryBatchSummary, *, include_trainable_groups: bool
) -> dict[str, float]:
    """The data metrics a training step reports (the same keys as `build_data_metrics_from_summary`).

    Example:
        >>> build_training_summary_metrics(TrajectoryBatchSummary(1, 8, 1, 0, []), include_trainable_groups=True)
        {'data/step_num_scenarios': 1.0, 'data/step_num_trajectories': 8.0, 'data/step_num_groups_submitted': 1.0, 'data/step_num_groups_trainable': 0.0}
    """
    return build_data_metrics_from_summary(summary, include_trainable_groups=include_trainable_groups)


def route_metric_key(key: str, split: str) -> str:
    """The name a metric gets in a row of `split` (the reference's rule): in a `train`, `val` or `test` row
    a key in a known section or split (`reward/mean`, `costs/train`, `val/win`) is kept, any other is
    prefixed (`custom` -> `train/custom`, `checkpoint/foo` -> `train/checkpoint/foo`); in a row of another
    split every key is prefixed.

    Example:
        >>> route_metric_key("reward/mean", "train"), route_metric_key("custom", "val")
        ('reward/mean', 'val/custom')
    """
    if split in METRIC_SPLITS:
        first, slash, _ = key.partition("/")
        if slash and (first in METRIC_SECTIONS or first in METRIC_SPLITS):
            return key
    return f"{split}/{key}"


def reference_train_metrics(
    metrics: Mapping[str, float], groups: Iterable[TrajectoryGroup]
) -> dict[str, float]:
    """A step's trainer metrics as the reference's `backend.train` returns them: `loss/train`,
    `loss/entropy`, `loss/grad_norm`, `loss/learning_rate`, `time/step_trainer_s`,
    `data/step_num_gradient_steps` (0 when nothing was trainable) and the `data/step_*` counts (from the
    groups where the trainer gave none); our other keys as they are (`ratio_mean` -> row `train/ratio_mean`).

    Example:
        >>> reference_train_metrics({"loss": 0.5, "ratio_mean": 1.0}, [])["loss/train"]
        0.5
    """
    out = {TRAINER_METRIC_NAMES.get(key, key): float(value) for key, value in metrics.items()}
    summary = build_training_summary_metrics(
        summarize_trajectory_groups(groups), include_trainable_groups=True
    )
    for key, value in summary.items():
        out.setdefault(key, value)
    if out.get(TRAIN_GRADIENT_STEPS_KEY) == 0.0:
        out["data/step_num_groups_trainable"] = 0.0
        out.setdefault("data/step_trainer_tokens", 0.0)
    return out
