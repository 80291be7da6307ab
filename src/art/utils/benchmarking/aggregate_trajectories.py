"""Trajectory metrics averaged per step (`load_aggregated_trajectories`) and each model's latest step
(`load_latest_metrics`), from what `load_trajectories` reads."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from art.utils.benchmarking._deps import missing

try:
    import polars as pl
except ImportError:
    raise missing("polars") from None

from art.record.storage import read_history_file
from art.utils.benchmarking.load_trajectories import load_trajectories
from art.utils.output_dirs import get_default_art_path, get_models_dir

_STEP_KEYS = ["model", "split", "step"]


async def load_aggregated_trajectories(
    project_name: str,
    models: list[str] | None = None,
    metrics: list[str] | None = None,
    art_path: str | None = None,
    include_history: bool = False,
) -> pl.DataFrame:
    """One row per model, split and step: each `metric_*` column averaged within every group, then across
    the step's groups (so a big group counts as much as a small one).

    `metrics` keeps only those metric names (without the `metric_` prefix; None: all). When a `reward` metric
    is among them, `metric_reward_std_dev` is the mean over groups of its standard deviation within each
    group. `include_history` adds `recorded_at`: when the model's `history.jsonl` first logged that step.
    Only `metric_*` columns are averaged, as in the reference: the `reward` column is not (log it in
    `metrics` too to get it here). Rows are sorted by model, split and step; no trajectories: an empty
    DataFrame.

    Example:
        df = await load_aggregated_trajectories("tic-tac-toe", metrics=["win"], include_history=True)
        df.select("model", "split", "step", "metric_win", "recorded_at")
    """
    df = await load_trajectories(project_name, models=models, art_path=art_path)
    if df.is_empty():
        return df
    metric_cols = [c for c in df.columns if c.startswith("metric_")]
    if metrics:
        requested = {f"metric_{m}" for m in metrics}
        metric_cols = [c for c in metric_cols if c in requested]
    per_group = df.group_by([*_STEP_KEYS, "group_number"]).agg(pl.col(c).mean() for c in metric_cols)
    per_step = per_group.group_by(_STEP_KEYS).agg(pl.col(c).mean() for c in metric_cols)
    if "metric_reward" in metric_cols:
        spread = (
            df.group_by([*_STEP_KEYS, "group_number"])
            .agg(pl.col("metric_reward").std().alias("group_reward_std"))
            .group_by(_STEP_KEYS)
            .agg(pl.col("group_reward_std").mean().alias("metric_reward_std_dev"))
        )
        per_step = per_step.join(spread, on=_STEP_KEYS, how="left")
    if include_history:
        history = _history_timestamps(project_name, models, art_path or get_default_art_path())
        if history:
            per_step = per_step.join(
                pl.DataFrame(history, schema={"model": pl.Utf8, "step": pl.Int64, "recorded_at": pl.Utf8}),
                on=["model", "step"],
                how="left",
            )
    return per_step.sort(_STEP_KEYS)


def _history_timestamps(project_name: str, models: list[str] | None, art_path: str) -> list[dict[str, Any]]:
    """(model, step, recorded_at) of the first `history.jsonl` row of each step of each model."""
    out: list[dict[str, Any]] = []
    root = Path(get_models_dir(project_name=project_name, art_path=art_path))
    for model_dir in sorted(d for d in root.iterdir() if d.is_dir()):
        if models is not None and model_dir.name not in models:
            continue
        first: dict[int, str] = {}
        for entry in read_history_file(model_dir / "history.jsonl"):
            step, recorded_at = entry.get("step"), entry.get("recorded_at")
            if isinstance(step, int) and recorded_at is not None:
                first.setdefault(step, str(recorded_at))
        out.extend({"model": model_dir.name, "step": s, "recorded_at": t} for s, t in first.items())
    return out


async def load_latest_metrics(
    project_name: str,
    models: list[str] | None = None,
    split: str = "val",
    metrics: list[str] | None = None,
    art_path: str | None = None,
) -> pl.DataFrame:
    """One row per model: its latest `step` at `split` and the step-averaged `metric_*` columns there.

    Built on `load_aggregated_trajectories` (same `models`, `metrics`, `art_path`); sorted by model.

    Example:
        latest = await load_latest_metrics("tic-tac-toe", models=["base", "agent-001"], metrics=["win"])
        print(latest.select("model", "step", "metric_win"))
    """
    df = await load_aggregated_trajectories(project_name, models=models, metrics=metrics, art_path=art_path)
    if df.is_empty():
        return df
    metric_cols = [c for c in df.columns if c.startswith("metric_")]
    latest = (
        df.filter(pl.col("split") == split)
        .group_by("model")
        .agg(pl.col("step").max(), *(pl.col(c).sort_by("step").last() for c in metric_cols))
    )
    return latest.sort("model")


__all__ = ["load_aggregated_trajectories", "load_latest_metrics"]
