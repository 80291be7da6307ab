"""One model's log: what `Model.log` turns trajectories and metrics into, and the state it keeps between calls.

`ModelLog.entry(...)` is the pipeline behind `model.log(...)`, in the order it runs:
1. the groups are checked (`Trajectory.validate_for_record`) before anything is written;
2. metrics the builder manages (`costs/...`, `{time,data,throughput}/step_...`) join its pending step, the
   rest are kept as given; then the automatic ones (`data/step_num_*`, unique scenarios, the backend's
   step wall time and GPU cost, the groups' own builder-managed values);
3. the groups not yet recorded at this split and step go to `trajectories/{split}/{step:04d}.jsonl`;
4. the history entry: the groups' summary (`group_metrics`), the metrics as given, the builder's flush.

`history_row(...)` names the entry's keys as the reference's writer does and stamps `training_step` and
`time/wall_clock_sec`. The builder's running totals live in the model's `state.json` (under the
reference's key), loaded again when the model's folder changes. The model itself adds what only it knows:
its step, its backend's measurements, the trackers (`art.integrations`).
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterable
from typing import Any

from art.metrics.builder import (
    MetricsBuilder,
    builder_managed_values,
    group_metrics,
    is_builder_managed_metric,
)
from art.metrics.taxonomy import (
    METRIC_SPLITS,
    build_data_metrics_from_summary,
    route_metric_key,
    summarize_trajectory_groups,
)
from art.record.storage import ModelStorage, group_fingerprint
from art.trajectories import Trajectory, TrajectoryGroup

# Where state.json keeps the running totals of the model's MetricsBuilder (the reference's key).
METRICS_BUILDER_STATE_KEY = "_metrics_builder_state"


def as_groups(
    trajectories: Iterable[Trajectory | TrajectoryGroup] | TrajectoryGroup | None,
) -> list[TrajectoryGroup]:
    """What `log()` takes, as groups: None, one group, groups, or trajectories (one group of them)."""
    if trajectories is None:
        return []
    if isinstance(trajectories, TrajectoryGroup):
        return [trajectories]
    items = list(trajectories)
    if all(isinstance(t, TrajectoryGroup) for t in items):
        return items  # type: ignore[return-value]
    if all(isinstance(t, Trajectory) for t in items):
        return [TrajectoryGroup(items)]  # type: ignore[arg-type]
    kinds = sorted({type(t).__name__ for t in items})
    raise TypeError(f"log() takes Trajectory objects or TrajectoryGroup objects (not mixed), got {kinds}")


def check_groups(groups: list[TrajectoryGroup]) -> None:
    """ValueError naming the group and trajectory of the first one the record cannot hold."""
    for gi, group in enumerate(groups):
        for ti, trajectory in enumerate(group.trajectories):
            try:
                trajectory.validate_for_record()
            except ValueError as e:
                raise ValueError(f"log(): group {gi}, trajectory {ti}: {e}") from None


class ModelLog:
    """The metrics builder of one model (with its totals in `state.json`), the clocks of its history rows,
    and the pipeline from `log()`'s arguments to a history entry (see the module docstring)."""

    def __init__(self) -> None:
        self.builder = MetricsBuilder("train")
        self._root: str | None = None  # the folder whose state.json the totals came from
        self._saved: dict[str, Any] | None = None  # the totals last written there
        self.run_start = time.time()  # `time/wall_clock_sec` counts from here
        # when the last "train" row's wall time was measured (monotonic s; registration restarts it), and
        # its step: `time/step_wall_s` and `costs/gpu` are measured once per step
        self._train_clock = time.monotonic()
        self._train_clock_step: int | None = None

    # ---- the builder and its totals -------------------------------------------------------------
    def loaded_builder(self, storage: ModelStorage) -> MetricsBuilder:
        """The builder, its totals read from `storage`'s state.json (again if the folder moved; what is
        pending stays)."""
        root = str(storage.root)
        if self._root != root:
            saved = (storage.read_state() or {}).get(METRICS_BUILDER_STATE_KEY)
            self.builder._load(saved if isinstance(saved, dict) else {}, keep_pending=True)
            self._root = root
            self._saved = self.builder.state_dict()
        return self.builder

    def builder_for_split(self, storage: ModelStorage, split: str) -> MetricsBuilder:
        """The builder `split`'s metrics go to: "val" and "test" share the "eval" cost context."""
        context = "eval" if split in ("val", "test") else split
        return self.loaded_builder(storage).for_cost_context(context, buffer_scope=context)

    def save_totals(self, storage: ModelStorage) -> None:
        """Write the builder's running totals into state.json, when they changed since the last write."""
        state = self.builder.state_dict()
        if state != self._saved:
            storage.write_state({**(storage.read_state() or {}), METRICS_BUILDER_STATE_KEY: state})
            self._saved = state

    # ---- the clocks --------------------------------------------------------------------------------
    def restart_step_clock(self) -> None:
        """Count the next step's wall time from now (`register` calls it)."""
        self._train_clock, self._train_clock_step = time.monotonic(), None

    def step_wall_seconds(self, step: int, now: float | None = None) -> float | None:
        """Seconds since the previous step's first "train" row (or registration), once per `step`: None when
        `step` was measured already. `now`: the monotonic clock's reading (read here when not given)."""
        if self._train_clock_step == step:
            return None
        now = time.monotonic() if now is None else now
        wall = max(0.0, now - self._train_clock)
        self._train_clock, self._train_clock_step = now, step
        return wall

    # ---- the pipeline ------------------------------------------------------------------------------
    async def entry(
        self,
        storage: ModelStorage,
        groups: list[TrajectoryGroup],
        split: str,
        step: int,
        given: dict[str, float],
        provided: set[str],
        automatic: dict[str, float],
        *,
        builder: MetricsBuilder,
        trajectories_given: bool,
    ) -> dict[str, float]:
        """Steps 2-4 of the module docstring for checked `groups`: the history entry to write (empty when
        there is nothing to write). `given`: what `split_given` left of the user's metrics, whose keys are
        `provided`; `automatic`: the model's own (step wall time, GPU cost), added unless provided;
        `trajectories_given`: the caller passed trajectories (even none: their data metrics are zeros)."""
        for key, number in automatic.items():
            if key not in provided:
                builder.add_metric(key, number)
        if trajectories_given and split in METRIC_SPLITS:
            summary = summarize_trajectory_groups(groups)
            data = build_data_metrics_from_summary(summary, include_trainable_groups=split == "train")
            for key, number in data.items():
                if key not in provided:
                    builder.add_metric(key, number)
            if summary.scenario_ids:
                builder.add_data(scenario_ids=summary.scenario_ids)
        for key, number in builder_managed_values(groups):
            builder.add_metric(key, number)
        if groups:
            present = storage.group_fingerprints(split, step)
            storage.append_groups(split, step, [g for g in groups if group_fingerprint(g) not in present])
        entry: dict[str, float] = {}
        if groups:
            entry.update(group_metrics(groups))
        entry.update(given)
        entry.update(await builder.flush())
        return entry

    def history_row(
        self, metrics: dict[str, float], split: str, step: int, *, route: bool = True
    ) -> dict[str, Any]:
        """One row of `history.jsonl` as the reference writes it: names routed by `route_metric_key`
        (`custom` -> `train/custom`, `reward/mean` kept; `route=False` keeps them), `training_step` and
        `time/wall_clock_sec` (seconds since this log was made)."""
        row: dict[str, Any] = {
            route_metric_key(key, split) if route else key: v for key, v in metrics.items()
        }
        row["training_step"] = step
        row["time/wall_clock_sec"] = time.time() - self.run_start
        return row


def split_given(builder: MetricsBuilder, metrics: dict[str, float] | None) -> dict[str, float]:
    """Add the builder-managed keys of `metrics` to `builder` (a refused key raises here, before anything
    is written); returns the others, which go to the history entry as given."""
    as_given: dict[str, float] = {}
    for key, value in (metrics or {}).items():
        number = float(value)
        if is_builder_managed_metric(key) and math.isfinite(number):
            builder.add_metric(key, number)
        else:
            as_given[key] = number
    return as_given
