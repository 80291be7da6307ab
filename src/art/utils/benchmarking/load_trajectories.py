"""`load_trajectories`: every trajectory a project's models logged, as one polars DataFrame.

Reads `{art_path}/{project}/models/{model}/trajectories/{split}/{step:04d}.jsonl` (or `.jsonl.gz`, what
`model.log` writes) and the reference ART's `{step:04d}.parquet` files, with ART's own record readers
(`art.record.storage`). Needs polars: `pip install 'agent-reinforcement-trainer[benchmarking]'`; the reference's Parquet files
also need pyarrow (the `parquet` extra).
"""

from __future__ import annotations

import asyncio
import json
import warnings
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from art.utils.benchmarking._deps import missing

try:
    import polars as pl
except ImportError:
    raise missing("polars") from None

from openai.types.chat.chat_completion import Choice
from tqdm.auto import tqdm

from art.record.parquet import read_parquet_groups_with_trainable
from art.record.storage import ModelStorage, read_groups_file
from art.trajectories import Trajectory, TrajectoryGroup, choice_to_message
from art.utils.output_dirs import get_default_art_path, get_models_dir

_TOOL_CALL = pl.Struct({"function": pl.Struct({"name": pl.Utf8, "arguments": pl.Utf8})})
_MESSAGE = pl.Struct(
    {"role": pl.Utf8, "content": pl.Utf8, "tool_calls": pl.List(_TOOL_CALL), "trainable": pl.Boolean}
)
FIXED_COLUMNS: dict[str, Any] = {
    "model": pl.Utf8,
    "split": pl.Utf8,
    "step": pl.Int64,
    "reward": pl.Float64,
    "group_number": pl.Int64,
    "messages": pl.List(_MESSAGE),
    "logs": pl.List(pl.Utf8),
}
"""The columns every non-empty result has, in order, with their polars types."""

# (prefix, polars type) of the columns made from each key of a dict field
_DYNAMIC = (
    ("metric_", pl.Float64),
    ("metadata_", pl.Utf8),
    ("group_metric_", pl.Float64),
    ("group_metadata_", pl.Utf8),
)


@dataclass(frozen=True)
class _StepRecord:
    model: str
    split: str
    step: int
    storage: ModelStorage


async def load_trajectories(
    project_name: str,
    models: list[str] | None = None,
    debug: bool = False,
    art_path: str | None = None,
) -> pl.DataFrame:
    """Every logged trajectory of `project_name` as a polars DataFrame, one row per trajectory.

    Columns, always: `model`, `split`, `step`, `reward`, `group_number` (numbers each group of a model,
    split and step, from 1 across the whole table), `messages` (a list of `{role, content, tool_calls,
    trainable}`; `trainable` is True for turns the model sampled, the `Choice`s) and `logs` (null when the
    trajectory logged nothing). Then one column per key ever used: `metric_{key}` (float),
    `metadata_{key}` (the value as text), `group_metric_{key}` and `group_metadata_{key}` (the group's,
    repeated on each of its rows); null where a trajectory lacks the key.

    `models` keeps only those model folders (None: all). `art_path` None reads `./.art`
    (`get_default_art_path()`). A project with no folder, or no trajectories, gives an empty DataFrame.
    Rows come in model, split, step order, then as logged. `debug` shows progress bars.

    A trajectory file that cannot be read raises ValueError naming the file (the reference skips it
    silently); a line torn by a crash is skipped with a warning naming the file and line, as everywhere
    `art.record.storage` reads.

    Example:
        df = await load_trajectories("tic-tac-toe", models=["base", "agent-001"], art_path=".art")
        df.filter(pl.col("split") == "val").group_by("model", "step").agg(pl.col("reward").mean())
    """
    return await asyncio.to_thread(_load, project_name, models, debug, art_path)


def _load(project_name: str, models: list[str] | None, debug: bool, art_path: str | None) -> pl.DataFrame:
    base = art_path if art_path is not None else get_default_art_path()
    root = Path(get_models_dir(project_name=project_name, art_path=base))
    if not root.is_dir():
        return pl.DataFrame()
    wanted = set(models) if models is not None else None
    model_dirs = sorted(d for d in root.iterdir() if d.is_dir() and (wanted is None or d.name in wanted))
    records: list[_StepRecord] = []
    for model_dir in tqdm(model_dirs, desc="Scanning models", unit="model", disable=not debug):
        records.extend(_step_records(base, project_name, model_dir))
    rows: list[dict[str, Any]] = []
    group_number = 0
    for record in tqdm(records, desc="Loading trajectories", unit="file", disable=not debug):
        for group, trainable in _read_step(record):
            group_number += 1
            for index, trajectory in enumerate(group.trajectories):
                flags = trainable[index] if trainable is not None else None
                rows.append(_row(record, group_number, group, trajectory, flags))
    if not rows:
        return pl.DataFrame()
    return _frame(rows)


def _step_records(base: str, project: str, model_dir: Path) -> list[_StepRecord]:
    """Every (split, step) with trajectory files in one model's folder, splits by name, steps ascending."""
    trajectories = model_dir / "trajectories"
    if not trajectories.is_dir():
        return []
    try:
        storage = ModelStorage(base, project, model_dir.name)
    except ValueError as e:
        warnings.warn(f"{model_dir}: skipped, not a model folder ART can read ({e})", stacklevel=4)
        return []
    records: list[_StepRecord] = []
    for split_dir in sorted(p for p in trajectories.iterdir() if p.is_dir()):
        try:
            steps = storage.logged_steps(split_dir.name)
        except ValueError as e:
            warnings.warn(f"{split_dir}: skipped, not a split folder ART can read ({e})", stacklevel=4)
            continue
        records.extend(_StepRecord(model_dir.name, split_dir.name, step, storage) for step in steps)
    return records


def _read_step(record: _StepRecord) -> list[tuple[TrajectoryGroup, list[list[bool]] | None]]:
    """The groups of one step: our JSON lines (where a turn is trainable when it is a Choice), or, for a
    step without them, the reference's Parquet file (with its `trainable` flags), as
    `ModelStorage.read_groups` chooses (the Parquet file beside our JSON lines is a copy of them)."""
    out: list[tuple[TrajectoryGroup, list[list[bool]] | None]] = []
    parquet = record.storage.parquet_path(record.split, record.step)
    path = record.storage.trajectories_path(record.split, record.step)
    if parquet.exists() and not path.exists():
        try:
            out.extend(read_parquet_groups_with_trainable(parquet))
        except ImportError:
            raise
        except Exception as e:
            if str(parquet) in str(e):
                raise
            raise ValueError(f"cannot read the trajectory file {parquet}: {e}") from e
    if path.exists():
        out.extend((group, None) for group in read_groups_file(path))
    return out


def _row(
    record: _StepRecord,
    group_number: int,
    group: TrajectoryGroup,
    trajectory: Trajectory,
    trainable: list[bool] | None,
) -> dict[str, Any]:
    row: dict[str, Any] = {
        "model": record.model,
        "split": record.split,
        "step": record.step,
        "reward": trajectory.reward,
        "group_number": group_number,
        "messages": _messages(trajectory.messages_and_choices, trainable),
        "logs": list(trajectory.logs) or None,
    }
    row.update({f"metric_{k}": float(v) for k, v in trajectory.metrics.items()})
    row.update({f"metadata_{k}": str(v) for k, v in trajectory.metadata.items()})
    row.update({f"group_metric_{k}": float(v) for k, v in group.metrics.items()})
    row.update({f"group_metadata_{k}": str(v) for k, v in group.metadata.items()})
    return row


def _messages(items: Iterable[Any], trainable: list[bool] | None) -> list[dict[str, Any]]:
    out = []
    for index, item in enumerate(items):
        if isinstance(item, Choice):
            message, sampled = choice_to_message(item), True
        else:
            message = item
            sampled = trainable[index] if trainable is not None and index < len(trainable) else False
        content = message.get("content")
        if content is not None and not isinstance(content, str):  # content parts: kept as their JSON
            content = json.dumps(content)
        calls = [
            {"function": {"name": function.get("name"), "arguments": function.get("arguments")}}
            for call in message.get("tool_calls") or []
            for function in [call.get("function") or {}]
        ]
        out.append(
            {
                "role": message.get("role"),
                "content": content,
                "tool_calls": calls or None,
                "trainable": sampled,
            }
        )
    return out


def _frame(rows: list[dict[str, Any]]) -> pl.DataFrame:
    schema = dict(FIXED_COLUMNS)
    keys = {key for row in rows for key in row} - set(FIXED_COLUMNS)
    for prefix, dtype in _DYNAMIC:
        schema.update({key: dtype for key in sorted(k for k in keys if k.startswith(prefix))})
    columns = {name: [row.get(name) for row in rows] for name in schema}
    return pl.DataFrame(columns, schema=schema)


__all__ = ["load_trajectories"]
