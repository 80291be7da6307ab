"""`percentage_comparison_bar_chart`: one bar per model, its first step's score and what training changed."""

from __future__ import annotations

from art.utils.benchmarking.charts._common import Figure, pl, plt, rows_to_draw, step_means
from art.utils.benchmarking.types import BenchmarkModelKey

TRAINED_COLOR = "#e67a30"
BASELINE_COLOR = "#e0dcd5"
_LABEL_COLOR = "#c05a20"


def percentage_comparison_bar_chart(
    df: pl.DataFrame,
    metric_name: str,
    models: list[str | BenchmarkModelKey] | None = None,
    title: str | None = None,
    y_label: str | None = None,
    perfect_score: float | None = None,
    num_decimals: int = 0,
) -> Figure:
    """A bar per model of `metric_name`'s mean at its first step, plus the change by its last step;
    returns the matplotlib Figure.

    A model evaluated at several steps gets an orange bar: the first step's score, with the change to the
    last step stacked on it (hatched, labelled "RL +12%"). A model evaluated once (a baseline) gets a grey
    bar. Each bar is topped by its final score. Scores whose totals are all at most 1.01 are read as
    fractions and shown in percent (x100, with "%"); `num_decimals` sets the labels' precision.
    `perfect_score` (in the metric's own units) draws a grey reference line labelled "Perfect score".
    `models`, `metric_name` and `title` work as in `training_progress_chart`; `y_label`, when given, labels
    the (tickless) y axis.

    Raises ValueError when the column is missing or no row is left to draw.

    Example:
        df = await load_trajectories("tic-tac-toe", models=["base", "agent-001"])
        fig = percentage_comparison_bar_chart(
            df, "win", models=[BenchmarkModelKey("base", "Base"), BenchmarkModelKey("agent-001", "Trained")]
        )
        fig.savefig("win-rate.png")
    """
    column, df, plot_models = rows_to_draw(
        df, metric_name, models, none_left="No rows left after filtering - check 'split' or model list."
    )
    bars: list[tuple[str, float, float]] = []  # (model, first step's score, change by the last step)
    for model, (_, values) in step_means(df, column, plot_models).items():
        first, last = float(values[0]), float(values[-1])
        bars.append((model, first, last - first if len(values) > 1 else 0.0))
    if not bars:
        raise ValueError("No data available for the requested models.")
    top = max(first + change for _, first, change in bars)
    scale = 100.0 if top <= 1.01 else 1.0
    unit = "%" if scale == 100.0 else ""

    fig, ax = plt.subplots(figsize=(6, 4), dpi=300)
    ax.grid(False)
    for x, (_, first, change) in enumerate(bars):
        base, gain = first * scale, change * scale
        ax.bar(x, base, width=0.7, color=TRAINED_COLOR if gain else BASELINE_COLOR, edgecolor="white")
        if gain:
            ax.bar(
                x,
                gain,
                width=0.7,
                bottom=base,
                color=TRAINED_COLOR,
                hatch="///",
                edgecolor="white",
                alpha=0.95,
            )
            ax.text(
                x,
                base + gain / 2,
                f"RL {gain:+.{num_decimals}f}{unit}",
                ha="center",
                va="center",
                color=_LABEL_COLOR,
                fontweight="bold",
                bbox={
                    "facecolor": "white",
                    "boxstyle": "round,pad=0.3",
                    "alpha": 0.95,
                    "edgecolor": TRAINED_COLOR,
                    "linewidth": 1,
                },
            )
        total = base + gain
        ax.text(
            x,
            total + top * scale * 0.02,
            f"{total:.{num_decimals}f}{unit}",
            ha="center",
            va="bottom",
            fontweight="bold",
        )

    if perfect_score is not None:
        line = perfect_score * scale
        ax.plot([-0.5, len(bars) - 0.5], [line, line], color="dimgray", linewidth=1, label="_nolegend_")
        ax.text(-0.4, line - top * scale * 0.05, "Perfect score", va="top", ha="left", color="dimgray")

    ax.set_xticks(range(len(bars)))
    ax.set_xticklabels([model for model, _, _ in bars], rotation=0, ha="center")
    ax.set_yticks([])
    if y_label is not None:
        ax.set_ylabel(y_label)
    for side in ("left", "top", "right"):
        ax.spines[side].set_visible(False)
    ax.margins(y=0.08)  # room for the labels above the tallest bar
    ax.set_title(title if title is not None else metric_name, pad=15)
    return fig


__all__ = ["percentage_comparison_bar_chart"]
