"""Plots of a model's history (history.jsonl) as PNG files; matplotlib is imported only when used.

`plot_history` draws what `art demo` and `art plot` both show by default: the reward per step (training
rollouts and held-out games) and any win rate. Each metric name gets its own panel (its own y scale, so a
loss of 2.3 never flattens a reward of 0.4), stacked over one shared axis of whole-number steps; within a
panel one line per split (`train/reward` and `val/reward` together; `val/base_reward` beside them as the
base model's line). Every history row is a point: rows logged at the same step (e.g. a RULER row and the
train row) are all drawn. Rates (names ending in win/draw/loss_rate/illegal or `_rate`) are shown in
percent; a panel whose values all lie in [0, 1] shows that whole range. `logged_metrics` lists what a
history holds, for error messages.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from art.record.storage import HISTORY_RECORD_KEYS

DEFAULT_METRICS = ("train/reward", "val/reward", "val/win")
"""What is drawn when no metrics are named (those that were logged)."""
_RATE_SUFFIXES = ("/win", "/draw", "/loss_rate", "/illegal", "_rate")
_RECORD_KEYS = HISTORY_RECORD_KEYS  # bookkeeping, not metrics


def series(history: Sequence[dict[str, Any]], metric: str) -> tuple[list[int], list[float]]:
    """(steps, values) of one metric across history entries, every row kept, ordered by step (rows of the
    same step in the order they were logged: two rows at one step are two points, none hides the other).

    Example:
        >>> series([{"step": 2, "val/reward": 0.5}, {"step": 1, "val/reward": 0.2}, {"step": 2, "val/reward": 0.7}], "val/reward")
        ([1, 2, 2], [0.2, 0.5, 0.7])
    """
    points = [
        (int(entry["step"]), float(value))
        for entry in history
        if isinstance(value := entry.get(metric), int | float) and not isinstance(value, bool)
    ]
    points.sort(key=lambda point: point[0])  # stable: a step's rows keep their logged order
    return [s for s, _ in points], [v for _, v in points]


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


def _panel(metric: str) -> str:
    """The panel a metric is drawn in: its name without the split, the base model's beside the trained."""
    return metric.rpartition("/")[2].removeprefix("base_")


def _panel_title(panel: str) -> str:
    return {"win": "win rate", "reward": "reward"}.get(panel, panel.replace("_", " "))


def _line_label(metric: str) -> str:
    """The line's name in its panel: the split (and "base model" for a `base_` metric)."""
    split, _, name = metric.rpartition("/")
    where = {"train": "training rollouts", "val": "held-out"}.get(split, split or "all")
    return f"{where}, base model" if name.startswith("base_") else where


def plot_history(
    history: Sequence[dict[str, Any]],
    out_path: str | os.PathLike[str],
    metrics: Sequence[str] | None = None,
    *,
    title: str | None = None,
) -> Path:
    """Draw metrics per step and save a PNG; returns its path.

    `metrics` None draws `DEFAULT_METRICS` that were logged; named metrics must all have been logged
    (ValueError naming those that were not, and what was). One panel per metric name, one line per split.

    Example:
        plot_history(model.history(), "plots/history.png", title="tic-tac-toe")
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import MaxNLocator, PercentFormatter

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
    panels: dict[str, list[str]] = {}
    for metric in chosen:
        panels.setdefault(_panel(metric), []).append(metric)
    fig, axes = plt.subplots(
        len(panels), 1, figsize=(7.5, 1.2 + 2.6 * len(panels)), dpi=120, sharex=True, squeeze=False
    )
    cycle = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    colors: dict[str, str] = {}  # one colour per line name, the same in every panel
    steps_seen: set[int] = set()
    for ax, (panel, members) in zip(axes[:, 0], panels.items(), strict=True):
        for metric in members:
            steps, ys = series(history, metric)
            steps_seen.update(steps)
            label = _line_label(metric)
            color = colors.setdefault(label, cycle[len(colors) % len(cycle)])
            ax.plot(steps, ys, marker="o", markersize=4, label=label, color=color)
        values = [v for m in members for v in series(history, m)[1]]
        if all(is_rate(m) for m in members):
            ax.yaxis.set_major_formatter(PercentFormatter(1.0))
        if values and min(values) >= 0.0 and max(values) <= 1.0:  # a share or a 0-1 reward: the whole range
            ax.set_ylim(-0.04, 1.04)
        ax.set_ylabel(_panel_title(panel))
        ax.grid(alpha=0.3)
        ax.legend(loc="best", fontsize="small")
    bottom = axes[-1, 0]
    bottom.set_xlabel("step")
    bottom.xaxis.set_major_locator(MaxNLocator(integer=True))  # steps are whole numbers
    if steps_seen:
        bottom.set_xlim(min(steps_seen) - 0.5, max(steps_seen) + 0.5)
    if title:
        axes[0, 0].set_title(title)
    out = Path(out_path)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.tight_layout()
    fig.savefig(out)
    plt.close(fig)
    return out
