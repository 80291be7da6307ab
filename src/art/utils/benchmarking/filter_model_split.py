"""`filter_rename_model_split`: keep the rows of chosen model/split pairs, under their display names."""

from __future__ import annotations

import functools
import operator

from art.utils.benchmarking._deps import missing

try:
    import polars as pl
except ImportError:
    raise missing("polars") from None

from art.utils.benchmarking.types import BenchmarkModelKey


def filter_rename_model_split(df: pl.DataFrame, models: list[BenchmarkModelKey]) -> pl.DataFrame:
    """The rows of `df` whose (model, split) is one of `models`, with `model` set to each key's display name.

    Other columns are untouched; an empty `models` keeps no row.

    Example:
        >>> import polars as pl
        >>> df = pl.DataFrame(
        ...     {"model": ["a", "a", "b"], "split": ["val", "train", "val"], "reward": [1.0, 0.5, 0.0]}
        ... )
        >>> out = filter_rename_model_split(df, [BenchmarkModelKey("a", "Trained"), BenchmarkModelKey("b")])
        >>> out.rows()
        [('Trained', 'val', 1.0), ('b', 'val', 0.0)]
    """
    if not models:
        return df.clear()
    matches = [(pl.col("model") == key.name) & (pl.col("split") == key.split) for key in models]
    kept = df.filter(functools.reduce(operator.or_, matches))
    model: pl.Expr = pl.col("model")
    for match, key in reversed(list(zip(matches, models, strict=True))):  # the first key that matches wins
        model = pl.when(match).then(pl.lit(key.display_name)).otherwise(model)
    return kept.with_columns(model.alias("model"))


__all__ = ["filter_rename_model_split"]
