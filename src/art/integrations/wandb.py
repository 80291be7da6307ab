"""Weights & Biases: one run per model, every logged step as a row on the `training_step` axis.

The run is opened at the model's first logged step: `wandb.init(project=model.project, name=model.name,
id=RUN_ID, entity=model.entity, resume="allow")`. RUN_ID is kept in the model's record (`trackers.json`,
key "wandb"): a resumed model (a restarted script, or another process on the same record) continues the run
of its record, and a new record starts a new run even under an old name. A fresh record gets
`{name}-{8 hex}`; a record that logged steps before run ids were stored gets `model.name` (what earlier
versions and the reference used), so its run continues too.

Works in W&B's offline mode (`WANDB_MODE=offline`): each process writes a segment
`WANDB_DIR/wandb/offline-run-*-RUN_ID`, all with the run's id, and `wandb sync --id RUN_ID DIRS...` uploads
them in order as one run. A row whose index in `history.jsonl` is ahead of W&B's own step counter is logged
at that index (an explicit W&B step), so the segments of a resumed run continue each other's steps instead
of each starting again at 0; otherwise rows are logged as the reference logs them (`run.log(row)`).

Each row is the `history.jsonl` row of the step, whose names are the reference's (`loss/train`,
`data/step_num_groups_trainable`, `train/reward`, `train/reward_std_dev`, ...), with `training_step` (the
x-axis of every section, so validation logged later for an earlier step lands at the right place) and
`time/wall_clock_sec`; every `costs/...` key is put on the `training_step` axis too. The step's
trajectories go to a table `{split}/trajectories` (one row per trajectory: group, reward, metrics,
metadata, the conversation as text, and, where the record has them, the trainer's advantage and the judge's
explanation).
"""

from __future__ import annotations

import json
import secrets
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from art.record.step_record import judge_explanation
from art.record.storage import group_fingerprint
from art.trajectories import Trajectory, TrajectoryGroup

if TYPE_CHECKING:
    from art.integrations.tracked import TrackedModel

# The reference's sections, each plotted against training_step.
SECTIONS = ("reward", "loss", "throughput", "costs", "time", "data", "train", "val", "test", "discarded")

TABLE_COLUMNS: list[str | int] = [
    "training_step",
    "group",
    "trajectory",
    "reward",
    "advantage",
    "judge_explanation",
    "metrics",
    "metadata",
    "conversation",
]


def wandb_row(split: str, step: int, row: dict[str, float]) -> dict[str, Any]:
    """The W&B row of one history row: the row itself (its names are already the reference's, see
    `Model._log_metrics`), with `training_step`.

    >>> wandb_row("train", 3, {"loss/train": 0.5, "train/reward": 1.0})
    {'loss/train': 0.5, 'train/reward': 1.0, 'training_step': 3}
    """
    out: dict[str, Any] = dict(row)
    out.setdefault("training_step", step)
    return out


def format_conversation(trajectory: Trajectory) -> str:
    """The trajectory's messages as plain text, one block per message (tool calls as name(arguments))."""
    blocks = []
    plain: list[dict[str, Any]] = trajectory.messages()  # type: ignore[assignment]  # plain dicts at run time
    for message in plain:
        text = message.get("content")
        if isinstance(text, list):
            text = "".join(str(p.get("text", "")) for p in text if isinstance(p, dict))
        lines = [f"[{message.get('role')}] {text or ''}".rstrip()]
        for call in message.get("tool_calls") or []:
            function = call.get("function") or {}
            lines.append(f"  -> {function.get('name')}({function.get('arguments')})")
        blocks.append("\n".join(lines))
    return "\n\n".join(blocks)


def table_rows(
    step: int,
    groups: Sequence[TrajectoryGroup],
    advantages: Sequence[Sequence[float | None]] | None = None,
) -> list[list[Any]]:
    """One row per trajectory, in `TABLE_COLUMNS` order; `advantages[g][t]` as the trainer recorded it (None
    where it did not: a held-out split, a record without the trainer's file)."""

    def advantage(gi: int, ti: int) -> float | None:
        if advantages is None or gi >= len(advantages) or ti >= len(advantages[gi]):
            return None
        return advantages[gi][ti]

    return [
        [
            step,
            gi,
            ti,
            t.reward,
            advantage(gi, ti),
            judge_explanation(t.logs),
            json.dumps(t.metrics, sort_keys=True),
            json.dumps(t.metadata, sort_keys=True),
            format_conversation(t),
        ]
        for gi, group in enumerate(groups)
        for ti, t in enumerate(group.trajectories)
    ]


def recorded_advantages(
    model: TrackedModel, split: str, step: int, groups: Sequence[TrajectoryGroup]
) -> list[list[float | None]] | None:
    """Each trajectory's advantage from the trainer's record of `split` at `step` (None for groups it has
    no record of); None when the step has no trainer record at all."""
    trained = model.storage.trained_groups(split, step)
    if not trained:
        return None
    out: list[list[float | None]] = []
    for group in groups:
        found = trained.get(group_fingerprint(group))
        if found is None or len(found.trajectories) != len(group.trajectories):
            out.append([None] * len(group.trajectories))
        else:
            out.append([t.advantage for t in found.trajectories])
    return out


def run_id(model: TrackedModel) -> str:
    """The W&B run id of `model`, from its record; a new one is chosen (and stored) on first use.

    Example:
        run_id(model)  # "agent-001-3fa2c9d1", the same in every process that logs this record
    """
    stored = model.storage.read_tracker("wandb").get("run_id")
    if isinstance(stored, str) and stored:
        return stored
    # Rows logged before this one: a record from before run ids were stored, whose run was named so.
    chosen = model.name if model.storage.history_rows() > 1 else f"{model.name}-{secrets.token_hex(4)}"
    model.storage.write_tracker("wandb", {"run_id": chosen})
    return chosen


class _Run:
    """A model's W&B run and the sections already declared on it."""

    def __init__(self, model: TrackedModel) -> None:
        import wandb

        self.wandb = wandb
        self.storage = model.storage
        self.run = wandb.init(
            project=model.project,
            name=model.name,
            id=run_id(model),
            entity=model.entity,
            resume="allow",
            reinit="create_new",
            config=model.wandb_config or None,
        )
        self.start = time.time()
        self.run.define_metric("training_step")
        self.run.define_metric("time/wall_clock_sec")
        self.sections: set[str] = set()
        self.cost_keys: set[str] = set()
        for section in SECTIONS:
            self._define(section)
        if model.wandb_config:  # as the reference: the config given at init, then once as an update
            self.run.config.update(model.wandb_config)  # type: ignore[no-untyped-call]

    def _define(self, section: str) -> None:
        if section not in self.sections:
            self.run.define_metric(f"{section}/*", step_metric="training_step")
            self.sections.add(section)

    def log(
        self,
        model: TrackedModel,
        split: str,
        step: int,
        row: dict[str, float],
        groups: Sequence[TrajectoryGroup],
    ) -> None:
        out = wandb_row(split, step, row)
        out.setdefault("time/wall_clock_sec", time.time() - self.start)
        for key in out:
            if "/" in key:
                self._define(key.split("/", 1)[0])
            if (
                key.startswith("costs/") and key not in self.cost_keys
            ):  # each cost on the step axis, as the reference
                self.run.define_metric(key, step_metric="training_step")
                self.cost_keys.add(key)
        rows = table_rows(step, groups, recorded_advantages(model, split, step, groups))
        if rows:
            out[f"{split}/trajectories"] = self.wandb.Table(columns=TABLE_COLUMNS, data=rows)
        # The row's place in history.jsonl (already written), so steps keep rising across processes. Given
        # only where W&B's own counter is behind it (a resumed offline segment starts again at 0); otherwise
        # `log(out)`, as the reference calls it (its unit test checks the call has no keyword).
        target, current = self.storage.history_rows() - 1, self.run.step
        if isinstance(current, int) and target > current:
            self.run.log(out, step=target)
        else:
            self.run.log(out)


_runs: dict[str, _Run] = {}


def get_run(model: TrackedModel) -> Any:
    """The model's open `wandb` run (started now if none is)."""
    return _get_run(model).run


def _get_run(model: TrackedModel) -> _Run:
    key = str(model.storage.root.resolve())
    current = _runs.get(key)
    if current is None or getattr(current.run, "_is_finished", False):
        current = _runs[key] = _Run(model)
    return current


def on_register(model: TrackedModel) -> None:
    """Nothing to do: the run starts with the first logged step."""


def on_log(
    model: TrackedModel, split: str, step: int, row: dict[str, float], groups: Sequence[TrajectoryGroup]
) -> None:
    """Log one step's row (and its trajectories as a table) to the model's run."""
    _get_run(model).log(model, split, step, row, groups)


def update_config(model: TrackedModel) -> None:
    """Add `model.update_wandb_config`'s keys to the model's open run (a run not yet open gets them at start)."""
    current = _runs.get(str(model.storage.root.resolve()))
    if current is not None and not getattr(current.run, "_is_finished", False):
        # nested dicts grow (W&B refuses that without allow_val_change); a changed value was refused already
        current.run.config.update(model.wandb_config, allow_val_change=True)  # type: ignore[no-untyped-call]


def finish(model: TrackedModel) -> None:
    """Finish the model's run (flushes everything to disk or to W&B); the next log starts it again."""
    current = _runs.pop(str(model.storage.root.resolve()), None)
    if current is not None:
        current.run.finish()
