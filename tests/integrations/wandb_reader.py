"""Read an offline W&B run back with wandb's own record definitions (no network, no W&B server).

An offline run is a `run-<id>.wandb` transaction log: a 7-byte header (":W&B", magic, version) then
LevelDB-log framing (32 KiB blocks; each fragment has a 7-byte header: crc32, length, type FULL/FIRST/
MIDDLE/LAST) around serialized `wandb.proto.wandb_internal_pb2.Record` messages. wandb no longer ships a
Python reader for it (its Go core reads it for `wandb sync`), so this unframes it and lets wandb's
protobuf classes parse each record.
"""

from __future__ import annotations

import json
import struct
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

_BLOCK = 32 * 1024
_HEADER = 7
_FULL, _FIRST, _MIDDLE, _LAST = 1, 2, 3, 4


def _payloads(data: bytes) -> list[bytes]:
    assert data[:4] == b":W&B", "not a .wandb transaction log"
    out: list[bytes] = []
    pending = b""
    offset = _HEADER
    while offset + _HEADER <= len(data):
        left_in_block = _BLOCK - offset % _BLOCK
        if left_in_block < _HEADER:  # block trailer padding
            offset += left_in_block
            continue
        _crc, length, kind = struct.unpack("<IHB", data[offset : offset + _HEADER])
        if kind == 0 and length == 0:  # zero padding to the end of the block
            offset += left_in_block
            continue
        fragment = data[offset + _HEADER : offset + _HEADER + length]
        offset += _HEADER + length
        if kind == _FULL:
            out.append(fragment)
        elif kind == _FIRST:
            pending = fragment
        elif kind == _MIDDLE:
            pending += fragment
        elif kind == _LAST:
            out.append(pending + fragment)
    return out


@dataclass
class OfflineRun:
    """What an offline run recorded: identity, metric definitions, history rows (values decoded)."""

    run_dir: Path
    run_id: str = ""
    project: str = ""
    display_name: str = ""
    step_metrics: dict[str, str] = field(default_factory=dict)  # metric name or glob -> its step metric
    history: list[dict[str, Any]] = field(default_factory=list)
    config: dict[str, Any] = field(default_factory=dict)  # the run's config after every update, in order


def read_offline_run(run_dir: Path) -> OfflineRun:
    """Parse the single `.wandb` file in an offline run folder."""
    from wandb.proto import wandb_internal_pb2

    (log_file,) = run_dir.glob("run-*.wandb")
    run = OfflineRun(run_dir)
    for payload in _payloads(log_file.read_bytes()):
        record = wandb_internal_pb2.Record()
        record.ParseFromString(payload)
        kind = record.WhichOneof("record_type")
        if kind == "run" and record.run.run_id:  # later run records may carry only updates
            run.run_id, run.project, run.display_name = (
                record.run.run_id,
                record.run.project,
                record.run.display_name,
            )
            for item in record.run.config.update:
                run.config[item.key] = json.loads(item.value_json)
        elif kind == "config":
            for item in record.config.update:
                run.config[item.key] = json.loads(item.value_json)
        elif kind == "metric":
            name = record.metric.name or record.metric.glob_name
            run.step_metrics[name] = record.metric.step_metric
        elif kind == "history":
            row = {}
            for item in record.history.item:
                key = item.key or "/".join(item.nested_key)
                row[key] = json.loads(item.value_json)
            row.setdefault("_step", record.history.step.num)  # W&B's own step (not always an item)
            run.history.append(row)
    return run
