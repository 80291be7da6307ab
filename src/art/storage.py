"""The on-disk record of a model: the ONE module that knows paths under `.art/`.

```
{base_path}/{project}/models/{name}/
  model.json                                   the model's registration
  history.jsonl                                one JSON line per logged step (metrics prefixed by split)
  trajectories/{split}/{step:04d}.jsonl(.gz)   one JSON line per trajectory group, lossless
  checkpoints/{step:04d}/                      PEFT adapter + optimizer state + art_checkpoint.json
```

Writes are append-only or atomic (temp file/folder, then rename), flushed and fsynced, so a crash never
corrupts what was already saved. A checkpoint folder counts only when its manifest `art_checkpoint.json`
is present; anything else under `checkpoints/` is an interrupted save and is cleaned up.
"""

from __future__ import annotations

import gzip
import json
import os
import re
import shutil
import tempfile
import warnings
from collections.abc import Iterable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from .trajectories import Trajectory, TrajectoryGroup

NAME_PATTERN = re.compile(r"^[A-Za-z0-9._-]+$")
CHECKPOINT_MANIFEST = "art_checkpoint.json"
_STEP_DIR = re.compile(r"^\d{4,}$")


def validate_name(value: str, field: str) -> str:
    """Refuse names that would not be safe as one path component. Returns `value` unchanged."""
    if not isinstance(value, str) or not value:
        raise ValueError(f"{field} must be a non-empty string of letters, digits, '.', '_' and '-'")
    if value in (".", "..") or not NAME_PATTERN.match(value):
        raise ValueError(
            f"{field} {value!r} is not allowed: use only letters, digits, '.', '_' and '-' "
            "(and not '.' or '..' alone), because it becomes a folder name"
        )
    return value


def _fsync_dir(path: Path) -> None:
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def atomic_write_text(path: Path, text: str) -> None:
    """Write a whole file atomically: temp file in the same folder, fsync, rename."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    _fsync_dir(path.parent)


class ModelStorage:
    """Paths and records of one model under `{base_path}/{project}/models/{name}/`."""

    def __init__(self, base_path: str | os.PathLike[str], project: str, name: str) -> None:
        self.base_path = Path(base_path)
        self.project = validate_name(project, "project")
        self.name = validate_name(name, "model name")
        self.root = self.base_path / self.project / "models" / self.name

    # ---- registration -------------------------------------------------------------------------
    @property
    def model_json_path(self) -> Path:
        return self.root / "model.json"

    def read_model_json(self) -> dict[str, Any] | None:
        """The stored registration, or None when the model was never registered here."""
        if not self.model_json_path.exists():
            return None
        data = json.loads(self.model_json_path.read_text(encoding="utf-8"))
        assert isinstance(data, dict)
        return data

    def write_model_json(self, data: dict[str, Any]) -> None:
        atomic_write_text(self.model_json_path, json.dumps(data, indent=2, sort_keys=True) + "\n")

    # ---- history ------------------------------------------------------------------------------
    @property
    def history_path(self) -> Path:
        return self.root / "history.jsonl"

    def append_history(self, step: int, metrics: dict[str, float]) -> dict[str, Any]:
        """Append one line `{"step", "recorded_at", **metrics}`; flushed and fsynced. Returns the entry."""
        entry: dict[str, Any] = {"step": step, "recorded_at": datetime.now(UTC).isoformat(), **metrics}
        line = json.dumps(entry, allow_nan=True) + "\n"
        self.root.mkdir(parents=True, exist_ok=True)
        with open(self.history_path, "a", encoding="utf-8") as f:
            f.write(line)
            f.flush()
            os.fsync(f.fileno())
        return entry

    def read_history(self) -> list[dict[str, Any]]:
        """Every logged entry in order. A torn last line (crash mid-write) is skipped with a warning."""
        return read_history_file(self.history_path)

    # ---- trajectories -------------------------------------------------------------------------
    def trajectories_dir(self, split: str) -> Path:
        return self.root / "trajectories" / validate_name(split, "split")

    def trajectories_path(self, split: str, step: int, *, compress: bool = False) -> Path:
        """Where the groups of `split` logged at `step` live (an existing file's format wins)."""
        folder = self.trajectories_dir(split)
        plain, gz = folder / f"{step:04d}.jsonl", folder / f"{step:04d}.jsonl.gz"
        if plain.exists():
            return plain
        if gz.exists():
            return gz
        return gz if compress else plain

    def append_groups(
        self, split: str, step: int, groups: Iterable[TrajectoryGroup], *, compress: bool = False
    ) -> Path:
        """Append groups (one JSON line each) to the step's file; logging a step twice appends."""
        path = self.trajectories_path(split, step, compress=compress)
        path.parent.mkdir(parents=True, exist_ok=True)
        text = "".join(json.dumps(g.model_dump(mode="json"), allow_nan=True) + "\n" for g in groups)
        if path.suffix == ".gz":
            # gzip files may hold several members; readers see them as one stream.
            with open(path, "ab") as raw:
                raw.write(gzip.compress(text.encode("utf-8")))
                raw.flush()
                os.fsync(raw.fileno())
        else:
            with open(path, "a", encoding="utf-8") as f:
                f.write(text)
                f.flush()
                os.fsync(f.fileno())
        return path

    def read_groups(self, split: str, step: int) -> list[TrajectoryGroup]:
        """The groups logged for `split` at `step`, as written (empty when none)."""
        path = self.trajectories_path(split, step)
        return read_groups_file(path) if path.exists() else []

    def logged_steps(self, split: str) -> list[int]:
        """Steps that have trajectories logged for `split`, ascending."""
        folder = self.trajectories_dir(split)
        if not folder.exists():
            return []
        steps = {
            int(p.name.split(".")[0]) for p in folder.iterdir() if re.match(r"^\d+\.jsonl(\.gz)?$", p.name)
        }
        return sorted(steps)

    # ---- checkpoints --------------------------------------------------------------------------
    @property
    def checkpoints_dir(self) -> Path:
        return self.root / "checkpoints"

    def checkpoint_dir(self, step: int) -> Path:
        return self.checkpoints_dir / f"{step:04d}"

    def checkpoint_steps(self) -> list[int]:
        """Steps with a complete checkpoint (manifest present), ascending."""
        if not self.checkpoints_dir.exists():
            return []
        steps = [
            int(p.name)
            for p in self.checkpoints_dir.iterdir()
            if p.is_dir() and _STEP_DIR.match(p.name) and (p / CHECKPOINT_MANIFEST).exists()
        ]
        return sorted(steps)

    def latest_checkpoint_step(self) -> int | None:
        steps = self.checkpoint_steps()
        return steps[-1] if steps else None

    def new_checkpoint_tmp_dir(self, step: int) -> Path:
        """A fresh temp folder beside the checkpoints, to be filled and then `commit_checkpoint`-ed."""
        self.checkpoints_dir.mkdir(parents=True, exist_ok=True)
        return Path(tempfile.mkdtemp(prefix=f".tmp-{step:04d}-", dir=self.checkpoints_dir))

    def commit_checkpoint(self, tmp_dir: Path, step: int, manifest: dict[str, Any]) -> Path:
        """Write the manifest last, then rename the temp folder to `checkpoints/{step:04d}` atomically."""
        final = self.checkpoint_dir(step)
        if (final / CHECKPOINT_MANIFEST).exists():
            raise FileExistsError(f"checkpoint {step} already exists at {final}; refusing to overwrite it")
        if final.exists():  # an interrupted save of the same step: not a checkpoint, replace it
            shutil.rmtree(final)
        body = {"step": step, "saved_at": datetime.now(UTC).isoformat(), **manifest}
        atomic_write_text(tmp_dir / CHECKPOINT_MANIFEST, json.dumps(body, indent=2, sort_keys=True) + "\n")
        os.replace(tmp_dir, final)
        _fsync_dir(self.checkpoints_dir)
        return final

    def clean_incomplete_checkpoints(self) -> list[Path]:
        """Delete leftovers of interrupted saves (temp folders, step folders without manifest)."""
        removed: list[Path] = []
        if not self.checkpoints_dir.exists():
            return removed
        for p in self.checkpoints_dir.iterdir():
            incomplete_step = (
                p.is_dir() and _STEP_DIR.match(p.name) and not (p / CHECKPOINT_MANIFEST).exists()
            )
            if p.name.startswith(".tmp-") or incomplete_step:
                shutil.rmtree(p, ignore_errors=True)
                removed.append(p)
        return removed

    def delete_checkpoint(self, step: int) -> None:
        """Remove one checkpoint (the manifest first, so a crash leaves it incomplete, never half-valid)."""
        folder = self.checkpoint_dir(step)
        (folder / CHECKPOINT_MANIFEST).unlink(missing_ok=True)
        shutil.rmtree(folder, ignore_errors=True)


def read_groups_file(path: str | os.PathLike[str]) -> list[TrajectoryGroup]:
    """The groups of one `trajectories/{split}/{step:04d}.jsonl(.gz)` file, one JSON group per line."""
    p = Path(path)
    if p.suffix == ".gz":
        with gzip.open(p, "rt", encoding="utf-8") as f:
            lines = f.read().splitlines()
    else:
        lines = p.read_text(encoding="utf-8").splitlines()
    return [TrajectoryGroup.model_validate(json.loads(line)) for line in lines if line.strip()]


def read_trajectories(path: str | os.PathLike[str]) -> list[Trajectory]:
    """All trajectories of one `trajectories/{split}/{step}.jsonl(.gz)` file, flattened across groups."""
    return [t for g in read_groups_file(path) for t in g.trajectories]


def read_history_file(path: Path) -> list[dict[str, Any]]:
    """Every entry of a `history.jsonl` file in order ([] if there is none). A line that is not JSON (a torn
    write) is skipped with a warning naming the file and line."""
    if not path.exists():
        return []
    entries: list[dict[str, Any]] = []
    for i, line in enumerate(path.read_text(encoding="utf-8").splitlines()):
        if not line.strip():
            continue
        try:
            entries.append(json.loads(line))
        except json.JSONDecodeError:
            warnings.warn(
                f"{path}: line {i + 1} is not valid JSON (interrupted write?); skipped", stacklevel=2
            )
    return entries
