"""`art ui`'s pages of models: `/` (the projects and models of the record) and `/m/{project}/{name}` (a
model's metric charts by step and split, step timings, its steps, checkpoints and the comparison form)."""

from __future__ import annotations

import math
from typing import Annotated, Any

from fastapi import APIRouter, Query, Request
from fastapi.responses import HTMLResponse

from art.metrics.builder import REWARD_KEY, REWARD_STD_DEV_KEY
from art.metrics.taxonomy import TRAINER_METRIC_NAMES
from art.ui import pages
from art.ui.record import ModelRef, RecordReader, split_of
from art.ui.routes.shared import Reader, base, no_model, page

router = APIRouter()
STEPS_PER_PAGE = 60
# The charts a model's page draws when none is chosen: the first four of these its history has, named as
# `Model.log` (reward, its spread within groups) and the backend's `train` (the reference's `loss/...`)
# write them, taken from where those names are made. tests/ui/test_ui_trained_record.py checks that a real
# training run writes every one.
DEFAULT_CHARTS = (
    REWARD_KEY,
    TRAINER_METRIC_NAMES["loss"],
    TRAINER_METRIC_NAMES["entropy"],
    REWARD_STD_DEV_KEY,
    TRAINER_METRIC_NAMES["grad_norm"],
)
# The trainer's phases (`train/{key}` in the history), charted under "Step timings"; the whole step's
# trainer time is `time/step_trainer_s`, in the chart of `time/step_*` keys beside them.
TIMING_KEYS = ("forward_backward_s", "tokenize_s", "save_s", "canary_s", "load_adapter_s")


@router.get("/", response_class=HTMLResponse)
def index(request: Request, reader: Reader) -> HTMLResponse:
    """Every model of the record: its base model, last step, steps per split, checkpoints, last reward."""
    models, problems = reader.models()
    rows = []
    for m in models:
        history, more = reader.history(m)
        problems += more
        rewards = [r["train/reward"] for r in history if isinstance(r.get("train/reward"), int | float)]
        rows.append(
            {
                "model": m,
                "base_model": reader.registration(m).get("base_model"),
                "last_step": max((int(r.get("step", 0)) for r in history), default=None)
                if history and history[-1]
                else None,
                "splits": {s: len(reader.steps(m, s)) for s in reader.splits(m)},
                "checkpoints": sum(1 for c in reader.checkpoints(m) if c.state == "kept"),
                "reward": rewards[-1] if rewards else None,
            }
        )
    return page(pages.index_page(base(request), str(reader.root), rows, problems))


@router.get("/m/{project}/{name}", response_class=HTMLResponse)
def model_view(
    request: Request,
    reader: Reader,
    project: str,
    name: str,
    metric: Annotated[list[str] | None, Query()] = None,
    page_number: Annotated[int, Query(alias="page", ge=0)] = 0,
) -> HTMLResponse:
    """A model's page: the chosen metrics' charts (by split), step timings, its steps (newest first, a page
    of them), checkpoints and the form that compares two steps."""
    ref = reader.model(project, name)
    if ref is None:
        return no_model(request, project, name)
    b = base(request)
    history, problems = reader.history(ref)
    splits = reader.splits(ref)
    keys = reader.metric_names(ref)
    by_name = _metrics_by_name(keys, splits)
    chosen = _chosen_charts(metric, by_name)
    charts = [
        pages.chart(
            short, {k.partition("/")[0] if k != short else k: reader.series(ref, k) for k in by_name[short]}
        )
        for short in chosen
    ]
    all_steps = {s: reader.steps(ref, s) for s in splits}
    pages_count = max((math.ceil(len(v) / STEPS_PER_PAGE) for v in all_steps.values()), default=1)
    shown = _steps_shown(reader, ref, all_steps, page_number)
    nav = pages.pager(
        lambda p: pages.model_url(b, ref, metric=chosen, page=p) + "#steps", page_number, pages_count
    )
    held_out = {s: v for s, v in all_steps.items() if s != "train"} or all_steps
    return page(
        pages.model_page(
            b,
            ref,
            reader.registration(ref),
            charts,
            pages.metric_chooser(b, ref, sorted(by_name), chosen),
            _timing_charts(reader, ref, keys),
            shown,
            nav,
            reader.checkpoints(ref),
            pages.compare_form(b, ref, held_out),
            problems
            + ([] if history or all_steps else ["this model has no history and no trajectories yet"]),
        )
    )


def _metrics_by_name(keys: list[str], splits: list[str]) -> dict[str, list[str]]:
    """The history's keys grouped by their name without the split (`train/reward`, `val/reward` -> reward)."""
    known_splits = sorted({*splits, *(split_of(k, splits)[0] for k in keys)} - {""})
    by_name: dict[str, list[str]] = {}
    for key in keys:
        _, short = split_of(key, known_splits)
        by_name.setdefault(short, []).append(key)
    return by_name


def _chosen_charts(metric: list[str] | None, by_name: dict[str, Any]) -> list[str]:
    """The metrics asked for that exist; else the first four `DEFAULT_CHARTS` there are; else two."""
    chosen = [m for m in (metric or []) if m in by_name] or [n for n in DEFAULT_CHARTS if n in by_name][:4]
    return chosen or sorted(by_name)[:2]


def _steps_shown(
    reader: RecordReader, ref: ModelRef, all_steps: dict[str, list[int]], page_number: int
) -> dict[str, list[tuple[int, float | None, str]]]:
    """A page of each split's steps, newest first, with the step's reward."""
    shown: dict[str, list[tuple[int, float | None, str]]] = {}
    for split, steps in all_steps.items():
        reward_at = dict(zip(*reader.series(ref, f"{split}/reward"), strict=True))
        newest_first = steps[::-1][page_number * STEPS_PER_PAGE : (page_number + 1) * STEPS_PER_PAGE]
        shown[split] = [(s, reward_at.get(s), "") for s in newest_first]
    return shown


def _timing_charts(reader: RecordReader, ref: ModelRef, keys: list[str]) -> list[str]:
    """Seconds per step: the step's wall and trainer time (`time/step_*`; not the running totals
    `time/cum/...`) and the trainer's phases (train/..._s)."""
    wall = [k for k in keys if k.startswith("time/step_") and ("_s" in k or "sec" in k)]
    phases = [f"train/{k}" for k in TIMING_KEYS if f"train/{k}" in keys]
    charts = []
    if wall:
        charts.append(pages.chart("wall time per step (s)", {k: reader.series(ref, k) for k in wall[:6]}))
    if phases:
        charts.append(
            pages.chart("trainer phases (s)", {k.partition("/")[2]: reader.series(ref, k) for k in phases})
        )
    return charts
