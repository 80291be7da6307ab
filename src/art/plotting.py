"""Plots of a model's history (history.jsonl) as PNG files; matplotlib is imported only when used.

`plot_history` draws what `art demo` and `art plot` both show by default: the reward per step (training
rollouts and held-out games) on the left axis and any win rate on the right, every axis labelled and every
line named. Given `metrics`, it draws exactly those (rates, i.e. names ending in win/draw/loss/illegal or
`_rate`, on the right axis). `logged_metrics` lists what a history holds, for error messages.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from .storage import HISTORY_RECORD_KEYS

DEFAULT_METRICS = ("train/reward", "val/reward", "val/win")
"""What is drawn when no metrics are named (those that were logged)."""
_RATE_SUFFIXES = ("/win", "/draw", "/loss_rate", "/illegal", "_rate")
_RECORD_KEYS = HISTORY_RECORD_KEYS  # bookkeeping, not metrics


def series(history: Sequence[dict[str, Any]], metric: str) -> tuple[list[int], list[float]]:
    """(steps, values) of one metric across history entries; the last value logged for a step wins.

    Example:
        >>> series([{"step": 1, "val/reward": 0.2}, {"step": 2, "val/reward": 0.5}], "val/reward")
        ([1, 2], [0.2, 0.5])
    """
    by_step: dict[int, float] = {}
    for entry in history:
        value = entry.get(metric)
        if isinstance(value, int | float) and not isinstance(value, bool):
            by_step[int(entry["step"])] = float(value)
    steps = sorted(by_step)
    return steps, [by_step[s] for s in steps]


def logged_metrics(history: Sequence[dict[str, Any]]) -> list[str]:
    """Every numeric metric some entry of `history` holds, sorted.

    Example:
        >>> logged_metrics([{"step": 1, "recorded_at": 0.0, "val/reward": 0.2, "train/loss": 1.5}])
        ['train/loss', 'val/reward']
    """
    return sorted(
        {
            k
            for entry in history
            for k, v in entry.items()
            if k not in _RECORD_KEYS and isinstance(v, int | float) and not isinstance(v, bool)
        }
    )


def is_rate(metric: str) -> bool:
    """Whether `metric` is a share of games or samples (drawn in % on the right axis).

    Example:
        >>> (is_rate("val/win"), is_rate("val/reward"))
        (True, False)
    """
    return metric.endswith(_RATE_SUFFIXES)


def _label(metric: str) -> str:
    split, _, name = metric.rpartition("/")
    where = {"train": "training rollouts", "val": "held-out"}.get(split, split)
    readable = {"win": "win rate", "reward": "reward"}.get(name, name.replace("_", " "))
    return f"{readable} ({where})" if where else readable


def plot_history(
    history: Sequence[dict[str, Any]],
    out_path: str | os.PathLike[str],
    metrics: Sequence[str] | None = None,
    *,
    title: str | None = None,
) -> Path:
    """Draw metrics per step and save a PNG; returns its path.

    `metrics` None draws `DEFAULT_METRICS` that were logged; named metrics must all have been logged
    (ValueError naming those that were not, and what was). Rates go on a right axis in percent.

    Example:
        plot_history(model.history(), "plots/history.png", title="tic-tac-toe")
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import PercentFormatter

    logged = logged_metrics(history)
    if metrics is None:
        chosen = [m for m in DEFAULT_METRICS if m in logged]
        if not chosen:
            raise ValueError(
                f"none of the default metrics ({', '.join(DEFAULT_METRICS)}) was logged; "
                f"logged metrics: {', '.join(logged) or 'none'}"
            )
    else:
        missing = [m for m in metrics if m not in logged]
        if missing:
            raise ValueError(
                f"no metric {', '.join(map(repr, missing))} in this history; "
                f"logged metrics: {', '.join(logged) or 'none'}"
            )
        chosen = list(metrics)
    values = [m for m in chosen if not is_rate(m)]
    rates = [m for m in chosen if is_rate(m)]

    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]  # one cycle over both axes
    fig, left = plt.subplots(figsize=(7.5, 4.2), dpi=120)
    handles: list[Any] = []
    for metric in values:
        steps, ys = series(history, metric)
        color = colors[len(handles) % len(colors)]
        handles += left.plot(steps, ys, marker="o", markersize=4, label=_label(metric), color=color)
    if values:
        left.set_ylabel("reward" if all(m.endswith("/reward") for m in values) else "value")
    if rates:
        right = left.twinx() if values else left
        for metric in rates:
            steps, ys = series(history, metric)
            color = colors[len(handles) % len(colors)]
            handles += right.plot(
                steps, ys, marker="s", markersize=4, linestyle="--", label=_label(metric), color=color
            )
        right.set_ylabel("win rate" if all(m.endswith("/win") for m in rates) else "rate")
        right.yaxis.set_major_formatter(PercentFormatter(1.0))
        right.set_ylim(-0.02, 1.02)
    left.set_xlabel("step")
    left.grid(alpha=0.3)
    left.legend(handles=handles, loc="best", fontsize="small")
    if title:
        left.set_title(title)
    out = Path(out_path)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.tight_layout()
    fig.savefig(out)
    plt.close(fig)
    return out
