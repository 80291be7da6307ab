"""Plots of a model's history (history.jsonl) as PNG files; matplotlib is imported only when used."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any


def series(history: Sequence[dict[str, Any]], metric: str) -> tuple[list[int], list[float]]:
    """(steps, values) of one metric across history entries; the last value logged for a step wins."""
    by_step: dict[int, float] = {}
    for entry in history:
        value = entry.get(metric)
        if isinstance(value, int | float):
            by_step[int(entry["step"])] = float(value)
    steps = sorted(by_step)
    return steps, [by_step[s] for s in steps]


def plot_history(
    history: Sequence[dict[str, Any]],
    out_path: str | os.PathLike[str],
    metrics: Sequence[str] = ("train/reward", "val/reward"),
    *,
    title: str | None = None,
) -> Path:
    """Draw each metric per step as a line on one chart and save it as a PNG. Returns the path."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4), dpi=120)
    drawn = 0
    for metric in metrics:
        steps, values = series(history, metric)
        if steps:
            ax.plot(steps, values, marker="o", label=metric)
            drawn += 1
    if not drawn:
        plt.close(fig)
        raise ValueError(f"none of the metrics {list(metrics)} was logged; nothing to plot")
    ax.set_xlabel("step")
    ax.grid(alpha=0.3)
    ax.legend()
    if title:
        ax.set_title(title)
    out = Path(out_path)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.tight_layout()
    fig.savefig(out)
    plt.close(fig)
    return out
