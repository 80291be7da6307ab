"""Trajectory groups as Parquet files, in the reference ART's format (`art.utils.trajectory_logging`).

The reference logs trajectories as `trajectories/{split}/{step:04d}.parquet`; ART logs lossless JSON lines
(`.jsonl`, which keep every sampled token id and logprob). These two functions read and write the
reference's files, so its records can be read here (`ModelStorage.read_groups` falls back to them) and
ours exported for tools that expect Parquet. The format keeps what the reference keeps: messages (role,
content, tool calls, whether the turn was sampled), rewards, metrics, metadata, tools and logs per
trajectory and group; sampled turns come back as plain assistant messages (no token ids or logprobs).

Needs pyarrow: `pip install 'agent-reinforcement-trainer[parquet]'`.

    write_trajectory_groups_parquet(groups, "0003.parquet")
    groups = read_trajectory_groups_parquet("0003.parquet")
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from art.trajectories import Trajectory, TrajectoryGroup, choice_to_message

_INSTALL = "pip install 'agent-reinforcement-trainer[parquet]' (or pip install pyarrow)"


def _pyarrow() -> Any:
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq
    except ImportError:
        raise ImportError(f"Parquet trajectory files need pyarrow: {_INSTALL}") from None
    return pa, pq


def _schema(pa: Any) -> Any:
    message = pa.struct(
        [
            ("role", pa.string()),
            ("content", pa.string()),
            ("tool_calls", pa.string()),
            ("tool_call_id", pa.string()),
            ("trainable", pa.bool_()),
        ]
    )
    return pa.schema(
        [
            ("group_index", pa.int64()),
            ("group_metadata", pa.string()),
            ("group_metrics", pa.string()),
            ("group_logs", pa.list_(pa.string())),
            ("reward", pa.float64()),
            ("metrics", pa.string()),
            ("metadata", pa.string()),
            ("tools", pa.string()),
            ("logs", pa.list_(pa.string())),
            ("messages", pa.list_(message)),
        ]
    )


def _json_or_none(value: Any) -> str | None:
    return json.dumps(value) if value else None


def _flat(item: Any) -> dict[str, Any]:
    trainable = not isinstance(item, dict)
    message = choice_to_message(item) if trainable else item
    content = message.get("content")
    if content is not None and not isinstance(content, str):  # content parts: kept as their JSON
        content = json.dumps(content)
    return {
        "role": message.get("role"),
        "content": content,
        "tool_calls": _json_or_none(message.get("tool_calls")),
        "tool_call_id": None if trainable else message.get("tool_call_id"),
        "trainable": trainable,
    }


def write_trajectory_groups_parquet(trajectory_groups: list[TrajectoryGroup], path: str | Path) -> None:
    """Write `trajectory_groups` to a Parquet file (zstd), one row per trajectory, in the reference's schema."""
    pa, pq = _pyarrow()
    rows = []
    for index, group in enumerate(trajectory_groups):
        for trajectory in group.trajectories:
            rows.append(
                {
                    "group_index": index,
                    "group_metadata": _json_or_none(group.metadata),
                    "group_metrics": _json_or_none(group.metrics),
                    "group_logs": group.logs or None,
                    "reward": trajectory.reward,
                    "metrics": _json_or_none(trajectory.metrics),
                    "metadata": _json_or_none(trajectory.metadata),
                    "tools": _json_or_none(trajectory.tools),
                    "logs": trajectory.logs or None,
                    "messages": [_flat(item) for item in trajectory.messages_and_choices],
                }
            )
    schema = _schema(pa)
    table = pa.Table.from_pylist(rows, schema=schema) if rows else schema.empty_table()
    pq.write_table(table, str(path), compression="zstd")


def _object(payload: Any, what: str, path: Path) -> dict[str, Any]:
    if not payload:
        return {}
    try:
        value = json.loads(payload)
    except (TypeError, ValueError):
        raise ValueError(f"{path}: {what} is not JSON: {str(payload)[:80]!r}") from None
    if not isinstance(value, dict):
        raise ValueError(f"{path}: {what} is not a JSON object")
    return value


def _message(flat: dict[str, Any]) -> dict[str, Any]:
    message: dict[str, Any] = {"role": flat["role"], "content": flat["content"]}
    if flat.get("tool_calls"):
        message["tool_calls"] = json.loads(flat["tool_calls"])
    if flat.get("tool_call_id"):
        message["tool_call_id"] = flat["tool_call_id"]
    return message


def read_trajectory_groups_parquet(path: str | Path) -> list[TrajectoryGroup]:
    """Read the groups of a Parquet file written by `write_trajectory_groups_parquet` or the reference ART,
    in group order. Sampled turns come back as plain assistant messages (the format keeps no logprobs)."""
    return [group for group, _ in read_parquet_groups_with_trainable(path)]


def _was_sampled(flat: dict[str, Any]) -> bool:
    """The file's `trainable` flag; the reference's older files had `finish_reason` (set on sampled turns)."""
    if "trainable" in flat:
        return bool(flat["trainable"])
    return flat.get("finish_reason") is not None


def read_parquet_groups_with_trainable(path: str | Path) -> list[tuple[TrajectoryGroup, list[list[bool]]]]:
    """`read_trajectory_groups_parquet`, each group paired with the file's `trainable` flag of every message
    (per trajectory, in order): whether the turn was sampled, which the plain messages no longer say."""
    _, pq = _pyarrow()
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"no Parquet trajectory file at {path}")
    rows = pq.read_table(str(path)).to_pylist()
    groups: dict[int, dict[str, Any]] = {}
    flags: dict[int, list[list[bool]]] = {}
    for row in sorted(rows, key=lambda r: r.get("group_index") or 0):
        if row.get("reward") is None and row.get("messages") is None:
            continue
        index = int(row.get("group_index") or 0)
        group = groups.setdefault(
            index,
            {
                "trajectories": [],
                "metadata": _object(row.get("group_metadata"), "group_metadata", path),
                "metrics": _object(row.get("group_metrics"), "group_metrics", path),
                "logs": [str(line) for line in row.get("group_logs") or []],
            },
        )
        tools = json.loads(row["tools"]) if row.get("tools") else None
        messages = row.get("messages") or []
        group["trajectories"].append(
            Trajectory(
                messages_and_choices=[_message(m) for m in messages],
                tools=tools,
                reward=float(row.get("reward") or 0.0),
                metrics=_object(row.get("metrics"), "metrics", path),
                metadata=_object(row.get("metadata"), "metadata", path),
                logs=[str(line) for line in row.get("logs") or []],
            )
        )
        flags.setdefault(index, []).append([_was_sampled(m) for m in messages])
    return [(TrajectoryGroup(**groups[i]), flags[i]) for i in sorted(groups)]


__all__ = ["read_trajectory_groups_parquet", "write_trajectory_groups_parquet"]
