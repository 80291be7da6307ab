"""What both charts share: the optional imports, the metric column, the models drawn and their means."""

from __future__ import annotations

import warnings
from collections.abc import Sequence

from art.utils.benchmarking._deps import missing

try:
    import polars as pl
except ImportError:
    raise missing("polars") from None
try:
    import matplotlib.pyplot as plt
    from matplotlib.figure import Figure
except ImportError:
    raise missing("matplotlib") from None

from art.utils.benchmarking.filter_model_split import filter_rename_model_split
from art.utils.benchmarking.types import BenchmarkModelKey

__all__ = ["Figure", "metric_column", "pl", "plt", "rows_to_draw", "select_models", "step_means"]


def metric_column(df: pl.DataFrame, metric_name: str) -> str:
    """`metric_name` when `df` has that column (e.g. "reward"), else `metric_{metric_name}`."""
    column = metric_name if metric_name in df.columns else f"metric_{metric_name}"
    if column not in df.columns:
        raise ValueError(f"Column '{column}' not found in DataFrame. Available columns: {list(df.columns)}")
    return column


def select_models(
    df: pl.DataFrame, models: Sequence[str | BenchmarkModelKey] | None
) -> tuple[pl.DataFrame, list[str]]:
    """The rows to draw and the models in drawing order.

    Given `models`: only their (model, split) rows, renamed to their display names, in the order given.
    None: every row, models evaluated at several steps (trained) first, then the others, each by name.
    """
    if models is not None:
        keys = [m if isinstance(m, BenchmarkModelKey) else BenchmarkModelKey(m) for m in models]
        return filter_rename_model_split(df, keys), [k.display_name for k in keys]
    if df.is_empty():
        return df, []
    counts = df.group_by("model").agg(pl.col("step").n_unique().alias("steps"))
    trained = sorted(m for m, n in counts.iter_rows() if n > 1)
    compared = sorted(m for m, n in counts.iter_rows() if n <= 1)
    return df, trained + compared


def rows_to_draw(
    df: pl.DataFrame, metric_name: str, models: Sequence[str | BenchmarkModelKey] | None, *, none_left: str
) -> tuple[str, pl.DataFrame, list[str]]:
    """What a chart of `metric_name` draws: its column (`metric_column`), the rows and the models in
    drawing order (`select_models`). ValueError(`none_left`) when no row is left (each chart keeps the
    reference's wording)."""
    column = metric_column(df, metric_name)
    df, plot_models = select_models(df, models)
    if df.is_empty():
        raise ValueError(none_left)
    return column, df, plot_models


def step_means(
    df: pl.DataFrame, column: str, plot_models: list[str]
) -> dict[str, tuple[list[int], list[float]]]:
    """(steps, mean of `column` at each step) for each of `plot_models` that has rows; the others are left
    out with a warning naming them."""
    means = df.group_by(["model", "step"]).agg(pl.col(column).mean()).sort(["model", "step"])
    out: dict[str, tuple[list[int], list[float]]] = {}
    for model in plot_models:
        sub = means.filter(pl.col("model") == model)
        if sub.is_empty():
            warnings.warn(f"no rows for model {model!r} (at its split): left out of the chart", stacklevel=3)
            continue
        out[model] = (sub["step"].to_list(), sub[column].to_list())
    return out
