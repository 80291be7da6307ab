"""`training_progress_chart`: a metric's mean per step, one line per model."""

from __future__ import annotations

from typing import Any, cast

from art.utils.benchmarking.charts._common import Figure, pl, plt, rows_to_draw, step_means
from art.utils.benchmarking.types import BenchmarkModelKey


def training_progress_chart(
    df: pl.DataFrame,
    metric_name: str,
    models: list[str | BenchmarkModelKey] | None = None,
    title: str | None = None,
    x_label: str | None = None,
    y_label: str | None = None,
    perfect_score: float | None = None,
    legend_loc: str | None = "lower right",
) -> Figure:
    """A line chart of `metric_name`'s mean per step for each model; returns the matplotlib Figure.

    `df` is `load_trajectories`' table; `metric_name` is a column ("reward") or a metric's name without
    its `metric_` prefix ("win"). `models` picks and orders the lines: names (read at split "val") or
    `BenchmarkModelKey`s (their split, shown under their display name); None draws every model of `df`,
    those evaluated at several steps first. A model evaluated at one step only (a prompted baseline) is a
    dashed horizontal line across the chart (dotted when another baseline has the same score); trained
    models are lines with a marker per step. `perfect_score` draws a grey reference line labelled
    "Perfect score". `title` defaults to `metric_name`, `x_label` to "Step"; `legend_loc` is matplotlib's.

    Raises ValueError when the column is missing or no row is left to draw.

    Example:
        df = await load_trajectories("tic-tac-toe", models=["base", "agent-001"])
        fig = training_progress_chart(
            df, "reward", models=[BenchmarkModelKey("agent-001", "Trained"), BenchmarkModelKey("base", "Base")]
        )
        fig.savefig("reward.png")
    """
    column, df, plot_models = rows_to_draw(
        df,
        metric_name,
        models,
        none_left="No rows left after applying the split filter. Check your 'split' argument or the "
        "DataFrame contents.",
    )
    series = step_means(df, column, plot_models)
    all_steps = [step for steps, _ in series.values() for step in steps]
    if not all_steps:
        raise ValueError("Unable to determine the range of training steps: no data available.")
    first_step, last_step = min(all_steps), max(all_steps)
    trained = [m for m in series if len(series[m][0]) > 1]
    baselines = [m for m in series if len(series[m][0]) == 1]

    fig, ax = plt.subplots(figsize=(6, 4), dpi=300)
    ax.grid(False)
    palette = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    colors = {m: palette[i % len(palette)] for i, m in enumerate(trained + baselines)}

    if perfect_score is not None:  # drawn first, so the models' lines cover it
        ax.plot(
            [first_step, last_step],
            [perfect_score, perfect_score],
            color="dimgray",
            linewidth=1,
            label="_nolegend_",
        )
        low, high = ax.get_ylim()
        ax.text(
            first_step,
            perfect_score - (high - low) * 0.1,
            "Perfect score",
            color="dimgray",
            verticalalignment="top",
            horizontalalignment="left",
        )

    baseline_scores: set[float] = set()
    for model in baselines:  # below the trained models' lines
        score = series[model][1][0]
        style = ":" if score in baseline_scores else "--"
        baseline_scores.add(score)
        ax.plot(
            [first_step, last_step],
            [score, score],
            linestyle=style,
            linewidth=2,
            color=colors[model],
            label=model,
        )
    for model in trained:
        steps, values = series[model]
        ax.plot(steps, values, marker="o", linewidth=2, color=colors[model], label=model)

    ax.set_title(title if title is not None else metric_name)
    ax.set_xlabel("Step" if x_label is None else x_label)
    if y_label is not None:
        ax.set_ylabel(y_label)
    handles, labels = ax.get_legend_handles_labels()
    by_label = dict(zip(labels, handles, strict=True))
    order = trained + baselines  # the legend lists trained models first, as they are drawn on top
    ax.legend(
        [by_label[m] for m in order],
        order,
        frameon=True,
        facecolor="white",
        loc=cast(Any, legend_loc),  # any location matplotlib accepts, checked by it
        borderaxespad=0.5,
    )
    ax.spines["top"].set_visible(False)
    ax.spines["right"].set_visible(False)
    fig.tight_layout(pad=1.0)
    return fig


__all__ = ["training_progress_chart"]
