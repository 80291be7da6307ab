"""The on-disk record of a model: the ONE module that knows paths under `.art/`.

```
{base_path}/{project}/models/{name}/
  model.json                                   the model's registration (with its "record_id")
  .writer.lock                                 held by the one service writing this record (`record_lock`)
  trackers.json                                which run of each tracker (W&B, Langfuse) the model reports
                                               to, so a resumed model continues the same run
  history.jsonl                                one JSON line per logged step (metrics prefixed by split)
  trajectories/{split}/{step:04d}.jsonl(.gz)   one JSON line per trajectory group, lossless
  trajectories/{split}/{step:04d}.trainer.jsonl  what the trainer saw: advantages, per-token logprobs and
                                               ratios, token stats (art.record.step_record; absent in old records)
  checkpoints/{step:04d}/                      PEFT adapter + optimizer state + the groups it trained on
                                               (trained_groups.jsonl.gz) + art_checkpoint.json
  checkpoints/rejected/{step:04d}-{time}/      checkpoints set aside (failed canary, corrupted), kept for
                                               debugging with a rejection.json saying why; never served
  {folder}/...                                 folders rooms above own (`owned_folder`): `art serve`'s jobs/,
                                               `art.langgraph`'s call logs
{base_path}/.serve/
  api_key                                      `art serve`'s key (owner-only), made at its first start
  models.json                                  the models `art serve` serves, restored when it restarts
```

Writes are append-only or atomic (temp file/folder, then rename), flushed and fsynced, so a crash never
corrupts what was already saved. A checkpoint folder counts only when its manifest `art_checkpoint.json`
is present; anything else under `checkpoints/` (but `rejected/`) is an interrupted save and is cleaned up.
The manifest holds the sha256 of every file, so a checkpoint corrupted on disk is caught before it loads.

Append-only files (`history.jsonl`, trajectory files) survive a write torn by a crash: the next write starts
on a new line (a gzip file's torn last member is repaired first), and readers skip a torn line with a
warning naming the file and the line.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import tempfile
import uuid
import warnings
from collections.abc import Iterable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from art.record.files import STORAGE_ERRNOS as STORAGE_ERRNOS
from art.record.files import _fsync_dir as _fsync_dir
from art.record.files import _gunzip_tolerant as _gunzip_tolerant
from art.record.files import _jsonl_text as _jsonl_text
from art.record.files import append_jsonl as append_jsonl
from art.record.files import atomic_write_bytes as atomic_write_bytes
from art.record.files import atomic_write_text as atomic_write_text
from art.record.files import disk_said as disk_said
from art.record.files import read_jsonl as read_jsonl
from art.record.files import scan_jsonl as scan_jsonl
from art.record.files import storage_error as storage_error
from art.record.names import _WINDOWS_RESERVED as _WINDOWS_RESERVED
from art.record.names import LONGEST_SUFFIX as LONGEST_SUFFIX
from art.record.names import NAME_MAX as NAME_MAX
from art.record.names import NAME_PATTERN as NAME_PATTERN
from art.record.names import _nearest_existing as _nearest_existing
from art.record.names import _pathconf as _pathconf
from art.record.names import validate_name as validate_name
from art.record.serve_paths import serve_api_key_path as serve_api_key_path
from art.record.serve_paths import serve_dir as serve_dir
from art.record.serve_paths import serve_models_path as serve_models_path
from art.record.step_record import StepTrainerRecord, TrainedGroup
from art.trajectories import Trajectory, TrajectoryGroup

CHECKPOINT_MANIFEST = "art_checkpoint.json"
CHECKPOINT_GROUPS = "trained_groups.jsonl.gz"  # the groups a checkpoint's step trained on, saved with it
REJECTED_DIR = "rejected"  # under checkpoints/: set-aside checkpoints, never counted or cleaned
REJECTION_FILE = "rejection.json"
TRAINER_RECORD_SUFFIX = (
    ".trainer.jsonl"  # trajectories/{split}/{step:04d}.trainer.jsonl (art.record.step_record)
)
_STEP_DIR = re.compile(r"^\d{4,}$")
# A PEFT adapter folder (what the reference ART saves as a checkpoint, without our manifest), and the files
# only ART's own checkpoints hold besides it (a folder with these but no manifest is an interrupted copy).
_ADAPTER_FILES = ("adapter_config.json", "adapter_model.safetensors")
_ART_ONLY_FILES = ("trainer_state.json", "optimizer.safetensors", CHECKPOINT_GROUPS)


class CheckpointCorruptError(ValueError):
    """A checkpoint's files do not match the checksums its manifest recorded when it was saved."""


def group_fingerprint(group: TrajectoryGroup | dict[str, Any]) -> str:
    """A content hash of a group as the record stores it (a `TrajectoryGroup` or its JSON form).

    Two copies of the same group, in this process or after a round trip through JSON (a file, HTTP), have
    the same fingerprint: the record uses it to never write a group twice at the same split and step.
    """
    data = group.model_dump(mode="json") if isinstance(group, TrajectoryGroup) else group
    canonical = json.dumps(data, sort_keys=True, separators=(",", ":"), allow_nan=True)
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


# Keys of a `history.jsonl` row that say where it belongs rather than what was measured.
HISTORY_RECORD_KEYS = frozenset({"step", "recorded_at", "training_step", "time/wall_clock_sec"})

_parquet_warned = False


def write_parquet_copy(groups: list[TrajectoryGroup], path: Path) -> bool:
    """Write `groups` to the Parquet file `path` in the reference's format, atomically; False (and one
    warning per process) when pyarrow is missing. The JSON lines stay the record: this is a copy."""
    global _parquet_warned
    try:
        from art.record.parquet import write_trajectory_groups_parquet

        partial = path.with_name(path.name + ".partial")
        write_trajectory_groups_parquet(groups, partial)
    except ImportError as e:
        if not _parquet_warned:
            _parquet_warned = True
            warnings.warn(
                f"trajectories are logged as JSON lines only, without the reference's Parquet copy: {e}",
                stacklevel=3,
            )
        return False
    os.replace(partial, path)
    return True


def _file_digest(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _read_json_object(path: Path) -> dict[str, Any] | None:
    """The JSON object in `path`, or None when there is no such file; ValueError naming it otherwise."""
    if not path.exists():
        return None
    data = json.loads(path.read_text(encoding="utf-8"))
    if not isinstance(data, dict):
        raise ValueError(f"{path} does not hold a JSON object; delete it or write a dict to it")
    return data


def new_record_id() -> str:
    """A fresh id for a model's record (its `model.json` "record_id", made at the first registration): a
    client tells by it whether a server still holds the record it trained, or a new one of the same name."""
    return uuid.uuid4().hex


def checkpoint_folder_step(folder: str | os.PathLike[str]) -> int | None:
    """The step of the complete checkpoint in `folder` (from its manifest), or None when it holds none.

    Example:
        >>> checkpoint_folder_step("/nonexistent") is None
        True
    """
    try:
        data = _read_json_object(Path(folder) / CHECKPOINT_MANIFEST)
    except (OSError, ValueError):
        return None
    step = data.get("step") if data is not None else None
    return step if isinstance(step, int) and not isinstance(step, bool) else None


class ModelStorage:
    """Paths and records of one model under `{base_path}/{project}/models/{name}/`."""

    def __init__(self, base_path: str | os.PathLike[str], project: str, name: str) -> None:
        self.base_path = Path(base_path)
        self.project = validate_name(project, "project")
        self.name = validate_name(name, "model name")
        self.root = self.base_path / self.project / "models" / self.name

    def check_filesystem_limits(self) -> None:
        """Raise ValueError, naming the limit, when the record's paths would not fit this filesystem.

        Checked where the record will live (the nearest folder that exists): each name against the
        filesystem's NAME_MAX, and the longest path the record creates against its PATH_MAX.
        """
        root = Path(os.path.abspath(self.root))
        existing = _nearest_existing(root)
        name_max = _pathconf(existing, "PC_NAME_MAX", NAME_MAX)
        for field, value in (("project", self.project), ("model name", self.name)):
            if len(os.fsencode(value)) > name_max:
                raise ValueError(
                    f"{field} is {len(value)} characters long; the filesystem of {existing} allows at most "
                    f"{name_max} bytes in a folder name (NAME_MAX). Use a shorter {field}."
                )
        path_max = _pathconf(existing, "PC_PATH_MAX", 4096)
        longest = len(os.fsencode(root)) + LONGEST_SUFFIX
        if longest > path_max:
            raise ValueError(
                f"the model's folder {root} is {len(os.fsencode(root))} bytes long and files under it need up "
                f"to {LONGEST_SUFFIX} more: beyond the filesystem's path limit of {path_max} bytes (PATH_MAX). "
                "Use a shorter base_path, project or model name."
            )

    # ---- registration -------------------------------------------------------------------------
    @property
    def model_json_path(self) -> Path:
        return self.root / "model.json"

    def read_model_json(self) -> dict[str, Any] | None:
        """The stored registration, or None when the model was never registered here."""
        return _read_json_object(self.model_json_path)

    def write_model_json(self, data: dict[str, Any]) -> None:
        atomic_write_text(self.model_json_path, json.dumps(data, indent=2, sort_keys=True) + "\n")

    # ---- the trackers' runs (integrations) -----------------------------------------------------
    @property
    def trackers_path(self) -> Path:
        return self.root / "trackers.json"

    def read_tracker(self, tracker: str) -> dict[str, Any]:
        """What `tracker` stored for this model (e.g. W&B's run id), or {} when nothing was."""
        value = (_read_json_object(self.trackers_path) or {}).get(tracker)
        return dict(value) if isinstance(value, dict) else {}

    def write_tracker(self, tracker: str, data: dict[str, Any]) -> None:
        """Replace what `tracker` stores for this model (atomically; other trackers' entries are kept)."""
        trackers = _read_json_object(self.trackers_path) or {}
        trackers[tracker] = data
        atomic_write_text(self.trackers_path, json.dumps(trackers, indent=2, sort_keys=True) + "\n")

    # ---- the user's state (the reference's `state.json`) --------------------------------------
    @property
    def state_path(self) -> Path:
        return self.root / "state.json"

    def read_state(self) -> dict[str, Any] | None:
        """The saved state, or None when none was saved."""
        return _read_json_object(self.state_path)

    def write_state(self, state: dict[str, Any]) -> None:
        """Replace the saved state atomically; a value JSON cannot hold is refused before anything is written."""
        if not isinstance(state, dict):
            raise TypeError(f"state must be a dict of JSON values, got {type(state).__name__}")
        try:
            text = json.dumps(state, indent=2, allow_nan=False)
        except (TypeError, ValueError) as e:
            raise TypeError(
                f"state must hold JSON values only (str, number, bool, None, list, dict): {e}"
            ) from e
        atomic_write_text(self.state_path, text + "\n")

    # ---- history ------------------------------------------------------------------------------
    @property
    def history_path(self) -> Path:
        return self.root / "history.jsonl"

    def append_history(self, step: int, metrics: dict[str, float]) -> dict[str, Any]:
        """Append one line `{"step", "recorded_at", **metrics}`; flushed and fsynced. Returns the entry."""
        entry: dict[str, Any] = {"step": step, "recorded_at": datetime.now(UTC).isoformat(), **metrics}
        append_jsonl(self.history_path, [json.dumps(entry, allow_nan=True)])
        return entry

    def read_history(self) -> list[dict[str, Any]]:
        """Every logged entry in order. A torn line (crash mid-write) is skipped with a warning."""
        return read_history_file(self.history_path)

    def history_rows(self) -> int:
        """How many rows `history.jsonl` holds (0 when there is none), without parsing them."""
        if not self.history_path.exists():
            return 0
        with self.history_path.open("rb") as f:
            return sum(1 for line in f if line.strip())

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

    def parquet_path(self, split: str, step: int) -> Path:
        """The step's Parquet file (`{step:04d}.parquet`): the reference's record, and our copy of the JSONL."""
        return self.trajectories_dir(split) / f"{step:04d}.parquet"

    def append_groups(
        self, split: str, step: int, groups: Iterable[TrajectoryGroup], *, compress: bool = False
    ) -> Path:
        """Append groups (one JSON line each) to the step's file; logging a step twice appends.

        The JSON lines are the record (lossless). A Parquet copy of the whole step, in the reference's
        format, is rewritten beside them after each append when pyarrow is installed (the reference's
        tools read it); without pyarrow a warning says so once. A Parquet file the reference left for this
        step, with no JSON lines yet, is taken into the JSON lines first, so its groups stay in the record.
        """
        path = self.trajectories_path(split, step, compress=compress)
        lines = [json.dumps(g.model_dump(mode="json"), allow_nan=True) for g in groups]
        parquet = self.parquet_path(split, step)
        if parquet.exists() and not path.exists():
            from art.record.parquet import read_trajectory_groups_parquet

            earlier = read_trajectory_groups_parquet(parquet)
            lines = [json.dumps(g.model_dump(mode="json"), allow_nan=True) for g in earlier] + lines
        append_jsonl(path, lines)
        write_parquet_copy(read_groups_file(path), parquet)
        return path

    def read_groups(self, split: str, step: int) -> list[TrajectoryGroup]:
        """The groups logged for `split` at `step`, as written (empty when none): our JSON lines, or, for a
        step that has none, the `{step:04d}.parquet` file the reference ART wrote (needs pyarrow)."""
        path = self.trajectories_path(split, step)
        if path.exists():
            return read_groups_file(path)
        parquet = self.parquet_path(split, step)
        if parquet.exists():
            from art.record.parquet import read_trajectory_groups_parquet

            return read_trajectory_groups_parquet(parquet)
        return []

    def group_fingerprints(self, split: str, step: int) -> set[str]:
        """`group_fingerprint` of every group logged for `split` at `step`."""
        path = self.trajectories_path(split, step)
        return {group_fingerprint(data) for _, data in read_jsonl(path)} if path.exists() else set()

    def logged_steps(self, split: str) -> list[int]:
        """Steps that have trajectories logged for `split` (ours, or the reference's Parquet), ascending."""
        folder = self.trajectories_dir(split)
        if not folder.exists():
            return []
        pattern = re.compile(r"^\d+\.(jsonl(\.gz)?|parquet)$")
        steps = {int(p.name.split(".")[0]) for p in folder.iterdir() if pattern.match(p.name)}
        return sorted(steps)

    # ---- the trainer's record of a step (art.record.step_record) ------------------------------------
    def trainer_record_path(self, split: str, step: int) -> Path:
        """Where the trainer's records of `split` at `step` live, beside the step's groups."""
        return self.trajectories_dir(split) / f"{step:04d}{TRAINER_RECORD_SUFFIX}"

    def append_trainer_record(self, split: str, step: int, record: StepTrainerRecord) -> Path:
        """Append one training call's record (one JSON line) to the step's trainer file."""
        path = self.trainer_record_path(split, step)
        append_jsonl(path, [record.model_dump_json()])
        return path

    def read_trainer_records(self, split: str, step: int) -> list[StepTrainerRecord]:
        """The trainer's records of `split` at `step`, oldest first (none for steps recorded without them)."""
        path = self.trainer_record_path(split, step)
        return read_trainer_records_file(path) if path.exists() else []

    def trained_groups(self, split: str, step: int) -> dict[str, TrainedGroup]:
        """The trainer's view of each group trained at `step`, by `group_fingerprint` (the newest call wins)."""
        return {g.fingerprint: g for r in self.read_trainer_records(split, step) for g in r.groups}

    # ---- folders the rooms above own ---------------------------------------------------------------
    def owned_folder(self, name: str) -> Path:
        """A folder of the model's record that a room above the record owns and names its files in
        (`art serve`'s training jobs, `art.langgraph`'s call logs): `{root}/{name}`."""
        return self.root / validate_name(name, "folder name")

    # ---- checkpoints --------------------------------------------------------------------------
    @property
    def checkpoints_dir(self) -> Path:
        return self.root / "checkpoints"

    @property
    def rejected_dir(self) -> Path:
        return self.checkpoints_dir / REJECTED_DIR

    def checkpoint_dir(self, step: int) -> Path:
        return self.checkpoints_dir / f"{step:04d}"

    def checkpoint_steps(self) -> list[int]:
        """Steps with a complete checkpoint (manifest present), ascending. Rejected ones do not count."""
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
        """Write the manifest (with every file's sha256) last, then rename the temp folder to
        `checkpoints/{step:04d}` atomically."""
        final = self.checkpoint_dir(step)
        if (final / CHECKPOINT_MANIFEST).exists():
            raise FileExistsError(f"checkpoint {step} already exists at {final}; refusing to overwrite it")
        if final.exists():  # an interrupted save of the same step: not a checkpoint, replace it
            shutil.rmtree(final)
        files = {
            p.relative_to(tmp_dir).as_posix(): {"sha256": _file_digest(p), "bytes": p.stat().st_size}
            for p in sorted(tmp_dir.rglob("*"))
            if p.is_file() and p.name != CHECKPOINT_MANIFEST
        }
        body = {"step": step, "saved_at": datetime.now(UTC).isoformat(), **manifest, "files": files}
        atomic_write_text(tmp_dir / CHECKPOINT_MANIFEST, json.dumps(body, indent=2, sort_keys=True) + "\n")
        os.replace(tmp_dir, final)
        _fsync_dir(self.checkpoints_dir)
        return final

    def read_checkpoint_manifest(self, step: int) -> dict[str, Any]:
        """The manifest of a complete checkpoint (`art_checkpoint.json`)."""
        data = json.loads((self.checkpoint_dir(step) / CHECKPOINT_MANIFEST).read_text(encoding="utf-8"))
        assert isinstance(data, dict)
        return data

    def verify_checkpoint(self, step: int) -> None:
        """Raise CheckpointCorruptError when a file of the checkpoint is missing or differs from what was saved.

        Checkpoints saved before manifests held checksums pass unchecked.
        """
        folder = self.checkpoint_dir(step)
        problems = []
        for name, expected in self.read_checkpoint_manifest(step).get("files", {}).items():
            path = folder / name
            if not path.is_file():
                problems.append(f"{name} is missing")
            elif path.stat().st_size != expected["bytes"]:
                problems.append(f"{name} has {path.stat().st_size} bytes, {expected['bytes']} were saved")
            elif _file_digest(path) != expected["sha256"]:
                problems.append(f"{name} changed since it was saved (sha256 differs)")
        if problems:
            raise CheckpointCorruptError(f"checkpoint {folder} is corrupted: {'; '.join(problems)}")

    def fork_checkpoint(self, source: ModelStorage, step: int) -> Path:
        """Copy checkpoint `step` of another model in as this model's checkpoint `step` (atomically).

        The source is verified first. The copy names this model in its manifest and records where it
        came from (`forked_from`); the groups the source trained on are left behind, so they never
        enter this model's record. Refused when this model already has a checkpoint at `step` or later.
        """
        source.verify_checkpoint(step)
        newer = [s for s in self.checkpoint_steps() if s >= step]
        if newer:
            raise FileExistsError(
                f"{self.project}/{self.name} already has checkpoint(s) {newer} at or after step {step}, so the "
                "fork would not be where training resumes; fork into a new model name (or delete those)"
            )
        manifest = source.read_checkpoint_manifest(step)
        self.checkpoints_dir.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=f".tmp-{step:04d}-", dir=self.checkpoints_dir))
        try:
            shutil.copytree(source.checkpoint_dir(step), tmp, dirs_exist_ok=True)
            (tmp / CHECKPOINT_GROUPS).unlink(missing_ok=True)
            files = {k: v for k, v in manifest.get("files", {}).items() if k != CHECKPOINT_GROUPS}
            manifest.update(
                model=self.name,
                files=files,
                forked_from={"project": source.project, "model": source.name, "step": step},
            )
            atomic_write_text(
                tmp / CHECKPOINT_MANIFEST, json.dumps(manifest, indent=2, sort_keys=True) + "\n"
            )
            final = self.checkpoint_dir(step)
            if final.exists():  # an interrupted save or fork of the same step: not a checkpoint
                shutil.rmtree(final)
            os.replace(tmp, final)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
        _fsync_dir(self.checkpoints_dir)
        return final

    def write_checkpoint_groups(self, folder: Path, groups: Iterable[TrajectoryGroup]) -> None:
        """Save the groups a step trained on into its (temporary) checkpoint folder, before the commit."""
        append_jsonl(
            folder / CHECKPOINT_GROUPS,
            [json.dumps(g.model_dump(mode="json"), allow_nan=True) for g in groups],
        )

    def checkpoint_groups_path(self, step: int) -> Path:
        return self.checkpoint_dir(step) / CHECKPOINT_GROUPS

    def reject_checkpoint(self, step: int, reason: str) -> Path:
        """Set checkpoint `step` aside under `checkpoints/rejected/` (with a rejection.json saying why), so it
        is never served or resumed from but stays for debugging. Returns its new folder.

        Only renames: it works on a full disk too (the rejection.json is then left out; the log says why)."""
        source = self.checkpoint_dir(step)
        stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%S%fZ")
        target = self.rejected_dir / f"{step:04d}-{stamp}"
        self.rejected_dir.mkdir(parents=True, exist_ok=True)
        note = {"step": step, "rejected_at": datetime.now(UTC).isoformat(), "reason": reason}
        try:
            atomic_write_text(source / REJECTION_FILE, json.dumps(note, indent=2) + "\n")
        except OSError as e:
            warnings.warn(
                f"{source}: could not write {REJECTION_FILE} ({e}); setting it aside anyway", stacklevel=2
            )
        os.replace(source, target)
        _fsync_dir(self.checkpoints_dir)
        _fsync_dir(self.rejected_dir)
        return target

    def rejected_checkpoints(self) -> list[Path]:
        """Folders of set-aside checkpoints, oldest first (by the time they were set aside)."""
        if not self.rejected_dir.exists():
            return []
        folders = [p for p in self.rejected_dir.iterdir() if p.is_dir() and not p.name.startswith(".")]
        return sorted(folders, key=lambda p: (p.name.partition("-")[2], p.name))

    def rejected_checkpoint_info(self, folder: Path) -> dict[str, Any]:
        """{name, step, rejected_at, reason} of a set-aside checkpoint (what its rejection.json says)."""
        try:
            note = _read_json_object(folder / REJECTION_FILE) or {}
        except (OSError, ValueError):
            note = {}
        head = folder.name.partition("-")[0]
        step = note.get("step", int(head) if head.isdigit() else -1)
        return {
            "name": folder.name,
            "step": step,
            "rejected_at": note.get("rejected_at"),
            "reason": note.get("reason"),
        }

    def delete_rejected_checkpoints(self, keep: int = 0) -> list[str]:
        """Delete set-aside checkpoints, oldest first, until at most `keep` remain; returns their names."""
        folders = self.rejected_checkpoints()
        deleted = []
        for folder in folders[: max(len(folders) - keep, 0)]:
            _remove_folder(folder)
            deleted.append(folder.name)
        return deleted

    def clean_incomplete_checkpoints(self) -> list[Path]:
        """Tidy the checkpoints folder before resuming; nothing a user may need is deleted.

        - `.tmp-*` folders (our own interrupted saves: never a checkpoint) are deleted;
        - a step folder without our manifest that holds a complete PEFT adapter and none of ART's own files
          (e.g. a checkpoint saved by the reference ART) is adopted: a manifest is written for it, and it is
          resumed from like any checkpoint (with a fresh optimizer), after the same checks;
        - any other step folder without a manifest (an interrupted copy or sync) is set aside under
          `checkpoints/rejected/` with the reason.

        Returns the folders deleted or set aside (adopted ones are not listed: see `adopted_checkpoints`)."""
        removed: list[Path] = []
        if not self.checkpoints_dir.exists():
            return removed
        for p in sorted(self.checkpoints_dir.iterdir()):
            if p.name.startswith(".tmp-"):
                shutil.rmtree(p, ignore_errors=True)
                removed.append(p)
            elif p.is_dir() and _STEP_DIR.match(p.name) and not (p / CHECKPOINT_MANIFEST).exists():
                problem = _foreign_adapter_problem(p)
                if problem is None:
                    self._adopt(p)
                else:
                    removed.append(
                        self.reject_checkpoint(int(p.name), f"no {CHECKPOINT_MANIFEST}: {problem}")
                    )
        return removed

    def _adopt(self, folder: Path) -> None:
        files = {
            f.relative_to(folder).as_posix(): {"sha256": _file_digest(f), "bytes": f.stat().st_size}
            for f in sorted(folder.rglob("*"))
            if f.is_file()
        }
        body = {
            "step": int(folder.name),
            "saved_at": datetime.fromtimestamp(folder.stat().st_mtime, UTC).isoformat(),
            "adopted_at": datetime.now(UTC).isoformat(),
            "note": "a PEFT adapter found without ART's manifest (e.g. saved by the reference ART); adopted",
            "files": files,
        }
        atomic_write_text(folder / CHECKPOINT_MANIFEST, json.dumps(body, indent=2, sort_keys=True) + "\n")

    def adopted_checkpoints(self) -> list[int]:
        """Steps whose checkpoint was adopted from a folder without ART's manifest (see above)."""
        return [s for s in self.checkpoint_steps() if "adopted_at" in self.read_checkpoint_manifest(s)]

    def delete_checkpoint(self, step: int) -> None:
        """Remove one checkpoint (the manifest first, so a crash leaves it incomplete, never half-valid). A
        checkpoint folder that is a symbolic link loses the link only: nothing outside the record is deleted."""
        _remove_folder(self.checkpoint_dir(step))


def _remove_folder(folder: Path) -> None:
    """Delete a checkpoint folder of the record: its manifest first, then the rest. A symbolic link (to a
    folder anywhere) is unlinked, never followed."""
    if folder.is_symlink():
        folder.unlink()
        return
    (folder / CHECKPOINT_MANIFEST).unlink(missing_ok=True)
    shutil.rmtree(folder, ignore_errors=True)


def _safetensors_problem(path: Path) -> str | None:
    """Why `path` is not a whole safetensors file (header unreadable, or data shorter/longer than it says)."""
    try:
        with path.open("rb") as f:
            size = int.from_bytes(f.read(8), "little")
            if size <= 0 or size > 100_000_000:
                return f"{path.name} has no safetensors header"
            header = json.loads(f.read(size))
        ends = [int(v["data_offsets"][1]) for k, v in header.items() if k != "__metadata__"]
    except (OSError, ValueError, KeyError, TypeError, IndexError):
        return f"{path.name} has no readable safetensors header"
    expected = 8 + size + max(ends, default=0)
    actual = path.stat().st_size
    if actual != expected:
        return f"{path.name} has {actual} bytes, its header describes {expected} (cut short?)"
    return None


def _foreign_adapter_problem(folder: Path) -> str | None:
    """None if `folder` is a complete PEFT adapter saved by someone else; else what makes it not one."""
    ours = [name for name in _ART_ONLY_FILES if (folder / name).exists()]
    if ours:
        return f"it holds ART's {', '.join(ours)}, so it is an interrupted save or copy of an ART checkpoint"
    missing = [name for name in _ADAPTER_FILES if not (folder / name).is_file()]
    if missing:
        return f"not a PEFT adapter folder (no {', '.join(missing)})"
    try:
        config = json.loads((folder / _ADAPTER_FILES[0]).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return f"{_ADAPTER_FILES[0]} is not valid JSON"
    if not isinstance(config, dict) or "r" not in config:
        return f"{_ADAPTER_FILES[0]} is not a LoRA config (no 'r')"
    return _safetensors_problem(folder / _ADAPTER_FILES[1])


def usable_checkpoint_steps(model_dir: str | os.PathLike[str]) -> list[int]:
    """Steps under `{model_dir}/checkpoints` whose folder a service would serve, ascending: ART's complete
    checkpoints (manifest present) and whole PEFT adapters saved by others (the reference's checkpoints,
    adopted when the model registers). Interrupted saves and set-aside folders do not count.

    Example:
        usable_checkpoint_steps(".art/demo/models/agent-001")  # [1, 2, 3]
    """
    folder = Path(model_dir) / "checkpoints"
    if not folder.is_dir():
        return []
    return sorted(
        int(p.name)
        for p in folder.iterdir()
        if p.is_dir()
        and _STEP_DIR.match(p.name)
        and ((p / CHECKPOINT_MANIFEST).exists() or _foreign_adapter_problem(p) is None)
    )


def read_history_file(path: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """Every entry of a `history.jsonl` file in order (none if it does not exist); torn lines are skipped
    with a warning naming the file and the line.

    Example:
        rows = read_history_file(".art/demo/models/agent-001/history.jsonl")
    """
    p = Path(path)
    return [entry for _, entry in read_jsonl(p)] if p.exists() else []


def read_groups_file(path: str | os.PathLike[str]) -> list[TrajectoryGroup]:
    """The groups of one `trajectories/{split}/{step:04d}.jsonl(.gz)` file, one JSON group per line.

    A torn line (crash mid-write) is skipped with a warning; a complete line that is not a valid group
    raises ValueError naming the file and the line.

    Example:
        groups = read_groups_file(".art/demo/models/agent-001/trajectories/train/0003.jsonl")
    """
    groups = []
    for number, data in read_jsonl(path):
        try:
            groups.append(TrajectoryGroup.model_validate(data))
        except (ValueError, TypeError) as e:
            raise ValueError(f"{path}: line {number} is not a valid trajectory group: {e}") from None
    return groups


def read_trajectories(path: str | os.PathLike[str]) -> list[Trajectory]:
    """All trajectories of one `trajectories/{split}/{step}.jsonl(.gz)` file, flattened across groups.

    Example:
        trajectories = read_trajectories(".art/demo/models/agent-001/trajectories/val/0003.jsonl")
    """
    return [t for g in read_groups_file(path) for t in g.trajectories]


def read_trainer_records_file(path: str | os.PathLike[str]) -> list[StepTrainerRecord]:
    """The `StepTrainerRecord`s of one `{step:04d}.trainer.jsonl` file; torn lines are skipped with a warning,
    a complete line that is not a record raises ValueError naming the file and the line."""
    records = []
    for number, data in read_jsonl(path):
        try:
            records.append(StepTrainerRecord.model_validate(data))
        except ValueError as e:
            raise ValueError(f"{path}: line {number} is not a trainer record: {e}") from None
    return records
