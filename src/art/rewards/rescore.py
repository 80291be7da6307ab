"""Re-score stored groups with a new rubric or judge, without running a single rollout.

Every step's groups are on disk (`trajectories/{split}/{step:04d}.jsonl(.gz)`, one group per line, see
`art.record.storage`). `rescore` reads them back, scores each group with RULER and returns the new groups with
their metrics, so one can ask "would this rubric, or this cheaper judge, have ranked my rollouts the same
way?" and read the answer in `ruler_calibration_*` (agreement with the hand-written reward) and
`ruler_previous_agreement` (agreement with the judge that scored them at the time). The record itself is
never modified. Judgements are cached, so an interrupted rescore resumes where it stopped.
"""

from __future__ import annotations

import asyncio
import logging
import os
import statistics
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any, Protocol, cast

from pydantic import BaseModel, Field

from art.record.storage import ModelStorage, read_groups_file
from art.rewards.cache import CacheSetting
from art.rewards.judge import JudgeLike
from art.rewards.ruler import DEFAULT_JUDGE, DEFAULT_RUBRIC, Aggregate, ruler_score_group
from art.trajectories import TrajectoryGroup

logger = logging.getLogger("art.rewards")


class _HasStorage(Protocol):
    """An `art.Model`: anything with its on-disk record as `.storage`."""

    @property
    def storage(self) -> ModelStorage: ...


class SkippedGroup(BaseModel):
    """A stored group that was not re-scored, and why.

    Example:
        for skipped in (await rescore(model, swallow_exceptions=True)).skipped:
            print(skipped.step, skipped.index, skipped.reason)
    """

    step: int | None
    index: int = Field(description="Position of the group within its step's file (0-based).")
    reason: str


class RescoreResult(BaseModel):
    """Re-scored groups (new objects; the record is untouched), where they came from, and a summary.

    Example:
        result = await rescore(model, rubric=new_rubric, steps=[3, 4])
        print(result.metrics, len(result.skipped), list(result.by_step()))
    """

    groups: list[TrajectoryGroup]
    steps: list[int | None] = Field(description="The step each group was logged at (None: not from a step).")
    skipped: list[SkippedGroup] = Field(default_factory=list)
    metrics: dict[str, float] = Field(
        default_factory=dict, description="Mean over groups of each ruler_* group metric, and counts."
    )

    def by_step(self) -> dict[int | None, list[TrajectoryGroup]]:
        """The groups keyed by the step they were logged at, in order."""
        out: dict[int | None, list[TrajectoryGroup]] = {}
        for step, group in zip(self.steps, self.groups, strict=True):
            out.setdefault(step, []).append(group)
        return out


def _step_of(path: Path) -> int | None:
    head = path.name.split(".")[0]
    return int(head) if head.isdigit() else None


def _load(
    source: Any, split: str, steps: int | Iterable[int] | None
) -> list[tuple[int | None, int, TrajectoryGroup]]:
    """(step, index within step, group) for everything to re-score."""
    wanted = {steps} if isinstance(steps, int) else (set(steps) if steps is not None else None)
    if isinstance(source, TrajectoryGroup):
        return [(None, 0, source)]
    if isinstance(source, str | os.PathLike):
        path = Path(source)
        if path.is_dir():
            files = sorted(p for p in path.iterdir() if p.name.endswith((".jsonl", ".jsonl.gz")))
        elif path.is_file():
            files = [path]
        else:
            raise FileNotFoundError(
                f"{path}: no such file or folder; give a trajectories file "
                "(.art/{project}/models/{name}/trajectories/{split}/0003.jsonl), its folder, or the model"
            )
        out: list[tuple[int | None, int, TrajectoryGroup]] = []
        for f in files:
            step = _step_of(f)
            if wanted is not None and step not in wanted:
                continue
            out.extend((step, i, g) for i, g in enumerate(read_groups_file(f)))
        return out
    storage: ModelStorage | None = None
    if isinstance(source, ModelStorage):
        storage = source
    else:
        attribute = getattr(source, "storage", None)  # art.Model.storage is a property
        if callable(attribute):
            attribute = attribute()
        if isinstance(attribute, ModelStorage):
            storage = attribute
    if storage is not None:
        logged = storage.logged_steps(split)
        if not logged:
            raise ValueError(
                f"no trajectories were logged for split {split!r} under {storage.root}; "
                "check the model's name, project and base_path, and the split"
            )
        chosen = [s for s in logged if wanted is None or s in wanted]
        if wanted is not None and (missing := sorted(wanted - set(logged))):
            raise ValueError(
                f"steps {missing} have no {split!r} trajectories under {storage.root}; logged: {logged}"
            )
        return [(step, i, g) for step in chosen for i, g in enumerate(storage.read_groups(split, step))]
    if isinstance(source, Iterable):
        items = list(source)
        if all(isinstance(g, TrajectoryGroup) for g in items):
            return [(None, i, g) for i, g in enumerate(items)]
    raise TypeError(
        "rescore(source=...) takes an art.Model (or its ModelStorage), a trajectories file or folder of the "
        f"on-disk record, or TrajectoryGroups; got {type(source).__name__}"
    )


async def rescore(
    source: _HasStorage | ModelStorage | str | os.PathLike[str] | TrajectoryGroup | Sequence[TrajectoryGroup],
    judge_model: JudgeLike | Sequence[JudgeLike] = DEFAULT_JUDGE,
    extra_litellm_params: dict[str, Any] | None = None,
    rubric: str = DEFAULT_RUBRIC,
    *,
    split: str = "train",
    steps: int | Iterable[int] | None = None,
    swallow_exceptions: bool = False,
    max_concurrency: int = 4,
    num_orders: int = 1,
    shuffle: bool = True,
    seed: int | str = 0,
    aggregate: Aggregate = "mean",
    cache: CacheSetting = True,
    debug: bool = False,
) -> RescoreResult:
    """Re-score stored groups with RULER (a new rubric and/or judge); no rollouts run.

    `source`: an `art.Model`/`TrainableModel` (its record under `base_path`), a `ModelStorage`, a
    trajectories file or folder of the record, or groups already loaded. `split` and `steps` (one, several,
    or None for all logged) pick what to re-score. Groups of fewer than 2 trajectories are skipped and
    listed in `result.skipped`. A failing group raises (after the groups in flight finish, so their
    judgements are cached and a re-run resumes), unless `swallow_exceptions=True`, which lists it in
    `result.skipped` and goes on. Other options as in `art.rewards.ruler_detailed`.

    Example:
        result = await art.rewards.rescore(model, "openai/o4-mini", rubric=new_rubric, split="val")
    """
    if max_concurrency < 1:
        raise ValueError(f"max_concurrency must be >= 1, got {max_concurrency}")
    items = _load(source, split, steps)
    if not items:
        raise ValueError("nothing to re-score: the source holds no groups (check split and steps)")
    skipped: list[SkippedGroup] = []
    todo: list[tuple[int | None, int, TrajectoryGroup]] = []
    for step, index, group in items:
        if len(group.trajectories) < 2:
            skipped.append(
                SkippedGroup(
                    step=step,
                    index=index,
                    reason=f"{len(group.trajectories)} trajectory(ies): nothing to compare",
                )
            )
        else:
            todo.append((step, index, group))

    gate = asyncio.Semaphore(max_concurrency)

    async def one(group: TrajectoryGroup) -> TrajectoryGroup:
        async with gate:  # ruler_score_group raises (swallow_exceptions=False): never None here
            scored = await ruler_score_group(
                group,
                judge_model,
                extra_litellm_params,
                rubric,
                debug=debug,
                num_orders=num_orders,
                shuffle=shuffle,
                seed=seed,
                aggregate=aggregate,
                cache=cache,
            )
            return cast(TrajectoryGroup, scored)

    outcomes = await asyncio.gather(*(one(g) for _, _, g in todo), return_exceptions=True)
    groups: list[TrajectoryGroup] = []
    group_steps: list[int | None] = []
    for (step, index, _), outcome in zip(todo, outcomes, strict=True):
        if isinstance(outcome, BaseException):
            if not swallow_exceptions or not isinstance(outcome, Exception):
                where = f"step {step}, group {index}" if step is not None else f"group {index}"
                outcome.add_note(f"while re-scoring {where}; groups scored so far are cached")
                raise outcome
            logger.warning("rescore: step %s group %d failed: %s", step, index, outcome)
            skipped.append(
                SkippedGroup(step=step, index=index, reason=f"{type(outcome).__name__}: {outcome}")
            )
            continue
        groups.append(outcome)
        group_steps.append(step)

    metrics: dict[str, float] = {"num_groups": float(len(groups)), "num_skipped": float(len(skipped))}
    names = sorted({k for g in groups for k in g.metrics if k.startswith("ruler_")})
    for name in names:
        values = [float(g.metrics[name]) for g in groups if name in g.metrics]
        metrics[name] = statistics.fmean(values)
    return RescoreResult(groups=groups, steps=group_steps, skipped=skipped, metrics=metrics)
