"""Reading a record (`.art/` by default) for `art ui` and `art show`: read-only, lazy, and tolerant.

Nothing here writes, repairs or locks anything: a record that a run is writing right now is read as it is,
and whatever cannot be read (a torn or unfinished JSON line, a file that vanished between listing and
opening, a folder that is not a record) becomes a sentence in `problems`, shown beside the rest.

Only what a page needs is read: the model list is a folder scan; a model page reads `history.jsonl` (one
line per step) and lists file names; a step page parses that one step's files. Parsed files are cached by
(path, size, modification time), so a page reloaded while nothing changed parses nothing, and a file that
grew is read again. Groups stay plain JSON dicts (as written): no pydantic validation of thousands of
Choices per page, and a line that is JSON but not a valid group is still shown.
"""

from __future__ import annotations

import json
import os
import re
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from art.record.plots import logged_metrics, series
from art.record.step_record import StepTrainerRecord, TrainedGroup
from art.record.storage import (
    CHECKPOINT_MANIFEST,
    NAME_PATTERN,
    REJECTED_DIR,
    REJECTION_FILE,
    TRAINER_RECORD_SUFFIX,
    group_fingerprint,
    scan_jsonl,
)

Json = dict[str, Any]
T = TypeVar("T")
_STEP_FILE = re.compile(r"^(\d+)\.(jsonl|jsonl\.gz|parquet)$")
_STEP_DIR = re.compile(r"^\d{4,}$")
# prefixes of history keys that are not splits (the metrics builder's sections)
SECTIONS = ("time", "costs", "data", "throughput", "loss", "reward", "discarded")


@dataclass(frozen=True)
class ModelRef:
    """A model found in the record: `{root}/{project}/models/{name}/`."""

    project: str
    name: str
    dir: Path

    @property
    def id(self) -> str:
        return f"{self.project}/{self.name}"


@dataclass
class Checkpoint:
    """A checkpoint folder: kept (complete), rejected (set aside, with why), or being written."""

    step: int
    state: str  # "kept", "rejected", "incomplete"
    when: str = ""
    reason: str = ""
    metrics: dict[str, float] = field(default_factory=dict)


@dataclass
class StepFile:
    """One step's groups (plain dicts, as written) and the trainer's records of them.

    The trainer's view of a group is looked up by content (`group_fingerprint`) only when asked for
    (`trained_group`): a page showing 16 groups of a 512-trajectory step hashes 16 groups, not 64, and
    validates only their part of the trainer's record.
    """

    split: str
    step: int
    groups: list[Json]
    records: list[StepTrainerRecord]  # without their groups (see `trained_group`)
    problems: list[str]
    trained_raw: dict[str, Json] = field(default_factory=dict)  # fingerprint -> group, as written
    _trained: dict[int, TrainedGroup | None] = field(default_factory=dict)

    @property
    def num_trajectories(self) -> int:
        return sum(len(g.get("trajectories") or []) for g in self.groups)

    def trained_group(self, index: int) -> TrainedGroup | None:
        """The trainer's record of group `index` (None: not trained, or recorded before the trainer's file)."""
        if index not in self._trained:
            raw = self.trained_raw.get(group_fingerprint(self.groups[index])) if self.trained_raw else None
            try:
                self._trained[index] = None if raw is None else TrainedGroup.model_validate(raw)
            except ValueError as e:
                self.problems.append(
                    f"the trainer's record of group {index} is unreadable: {str(e).splitlines()[0]}"
                )
                self._trained[index] = None
        return self._trained[index]

    @property
    def trained(self) -> list[TrainedGroup | None]:
        """`trained_group` of every group."""
        return [self.trained_group(i) for i in range(len(self.groups))]


def _stat_key(path: Path) -> tuple[int, int] | None:
    try:
        st = path.stat()
    except OSError:
        return None
    return st.st_size, st.st_mtime_ns


class _Cache:
    """A small LRU of parsed files keyed by (path, size, mtime): a changed file is parsed again."""

    def __init__(self, size: int = 8) -> None:
        self.size = size
        self.items: OrderedDict[tuple[Any, ...], Any] = OrderedDict()

    def get(self, key: tuple[Any, ...], make: Callable[[], T]) -> T:
        if key in self.items:
            self.items.move_to_end(key)
            return self.items[key]  # type: ignore[no-any-return]
        value = make()
        self.items[key] = value
        while len(self.items) > self.size:
            self.items.popitem(last=False)
        return value


class RecordReader:
    """Read-only access to the models under `root` (a record folder, a project folder or a model folder)."""

    def __init__(self, root: str | os.PathLike[str]) -> None:
        self.root = Path(root)
        self._cache = _Cache()

    # ---- models -------------------------------------------------------------------------------
    def models(self) -> tuple[list[ModelRef], list[str]]:
        """Every model under the root, sorted, and what made the root unreadable as a record (if anything)."""
        root = self.root
        if not root.exists():
            return [], [f"{root} does not exist"]
        if not root.is_dir():
            return [], [f"{root} is a file, not a record folder (pass a folder such as .art)"]
        found: list[ModelRef] = []
        if root.parent.name == "models" and _looks_like_model(root):  # a model's own folder
            found.append(ModelRef(root.parent.parent.name, root.name, root))
        elif (root / "models").is_dir():  # a project folder
            found += _models_in(root.name, root / "models")
        else:
            for project in _subdirs(root):
                if (project / "models").is_dir():
                    found += _models_in(project.name, project / "models")
        if not found:
            return [], [
                f"{root} is not an ART record: no {{project}}/models/{{name}}/ folder with a history, "
                "trajectories or checkpoints was found under it (pass the folder `art demo` or your script "
                "wrote, .art by default)"
            ]
        return sorted(found, key=lambda m: (m.project, m.name)), []

    def model(self, project: str, name: str) -> ModelRef | None:
        """The model `project/name`, or None when the record has none such (or the names are not names)."""
        if not (NAME_PATTERN.match(project) and NAME_PATTERN.match(name)) or ".." in (project, name):
            return None
        models, _ = self.models()
        return next((m for m in models if m.project == project and m.name == name), None)

    def registration(self, model: ModelRef) -> Json:
        """model.json (empty when absent or unreadable)."""
        try:
            data = json.loads((model.dir / "model.json").read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return {}
        return data if isinstance(data, dict) else {}

    # ---- history ------------------------------------------------------------------------------
    def history(self, model: ModelRef) -> tuple[list[Json], list[str]]:
        """Every readable history row in order, and what could not be read."""
        path = model.dir / "history.jsonl"
        key = _stat_key(path)
        if key is None:
            return [], []
        return self._cache.get(("history", path, *key), lambda: _scan(path, "history"))

    def metric_names(self, model: ModelRef) -> list[str]:
        """Every numeric key of the history (`split/metric` or `section/metric`)."""
        rows, _ = self.history(model)
        return self._cache.get(
            ("metrics", model.dir / "history.jsonl", *(_stat_key(model.dir / "history.jsonl") or ())),
            lambda: logged_metrics(rows),
        )

    def series(self, model: ModelRef, metric: str) -> tuple[list[int], list[float]]:
        """(steps, values) of one history key."""
        rows, _ = self.history(model)
        return series(rows, metric)

    # ---- steps --------------------------------------------------------------------------------
    def splits(self, model: ModelRef) -> list[str]:
        """Splits with logged trajectories (train first, then val, then the rest by name)."""
        names = [p.name for p in _subdirs(model.dir / "trajectories") if NAME_PATTERN.match(p.name)]
        order = {"train": 0, "val": 1, "test": 2}
        return sorted(names, key=lambda s: (order.get(s, 3), s))

    def steps(self, model: ModelRef, split: str) -> list[int]:
        """Steps with a trajectory file for `split`, ascending (a file listing; nothing is opened)."""
        if not NAME_PATTERN.match(split):
            return []
        try:
            names = os.listdir(model.dir / "trajectories" / split)
        except OSError:
            return []
        return sorted({int(m.group(1)) for n in names if (m := _STEP_FILE.match(n))})

    def step(self, model: ModelRef, split: str, step: int) -> StepFile:
        """One step's groups, matched with the trainer's record of them, and what could not be read."""
        folder = model.dir / "trajectories" / split
        if not NAME_PATTERN.match(split):
            return StepFile(split, step, [], [], [f"{split!r} is not a split name"])
        problems: list[str] = []
        path = next(
            (p for p in (folder / f"{step:04d}.jsonl", folder / f"{step:04d}.jsonl.gz") if p.exists()), None
        )
        groups: list[Json] = []
        if path is None:
            if (folder / f"{step:04d}.parquet").exists():
                problems.append(
                    f"step {step} of {split} is a Parquet file (the reference's format): `art ui` shows "
                    "JSONL records only; convert it with art.utils.trajectory_logging"
                )
            else:
                problems.append(f"no trajectories were logged for {split} at step {step}")
        else:
            key = _stat_key(path)
            if key is None:
                problems.append(f"{path} vanished while it was being read")
            else:
                groups, more = self._cache.get(("groups", path, *key), lambda: _scan_groups(path))
                problems += more
        records, raw, more = self.trainer_records(model, split, step)
        problems += more
        return StepFile(split, step, groups, records, problems, raw)

    def trainer_records(
        self, model: ModelRef, split: str, step: int
    ) -> tuple[list[StepTrainerRecord], dict[str, Json], list[str]]:
        """The trainer's records of a step without their groups, its groups by fingerprint (as written; the
        newest record wins), and what could not be read. Nothing for records older than the trainer's file."""
        path = model.dir / "trajectories" / split / f"{step:04d}{TRAINER_RECORD_SUFFIX}"
        key = _stat_key(path)
        if key is None:
            return [], {}, []
        return self._cache.get(("trainer", path, *key), lambda: _scan_records(path))

    # ---- checkpoints --------------------------------------------------------------------------
    def checkpoints(self, model: ModelRef) -> list[Checkpoint]:
        """Kept checkpoints (with their manifest's time and canary numbers), rejected ones (with why), and
        folders being written; ascending by step."""
        folder = model.dir / "checkpoints"
        out: list[Checkpoint] = []
        for p in _subdirs(folder):
            if _STEP_DIR.match(p.name):
                manifest = _json_file(p / CHECKPOINT_MANIFEST)
                if manifest is None:
                    out.append(
                        Checkpoint(int(p.name), "incomplete", reason="no manifest yet (being written?)")
                    )
                    continue
                metrics = manifest.get("metrics") if isinstance(manifest.get("metrics"), dict) else {}
                kept = {
                    k: float(v)
                    for k, v in (metrics or {}).items()
                    if k.startswith("canary") and isinstance(v, int | float)
                }
                kind = manifest.get("kind", "")
                trained_on = manifest.get("trained_on_step")
                note = (
                    f"{kind} step on checkpoint {trained_on}"
                    if kind and trained_on is not None
                    else str(kind)
                )
                if "forked_from" in manifest or "adopted_at" in manifest:
                    note = (
                        "forked from another model"
                        if "forked_from" in manifest
                        else "adopted (no ART manifest)"
                    )
                out.append(Checkpoint(int(p.name), "kept", str(manifest.get("saved_at", "")), note, kept))
            elif p.name.startswith(".tmp-"):
                tmp_step = p.name.split("-")[1]
                if tmp_step.isdigit():
                    out.append(
                        Checkpoint(int(tmp_step), "incomplete", reason="being saved (a temporary folder)")
                    )
        for p in _subdirs(folder / REJECTED_DIR):
            rejection = _json_file(p / REJECTION_FILE) or {}
            step_text = p.name.split("-")[0]
            step = int(rejection.get("step", step_text if step_text.isdigit() else -1))
            reason = str(rejection.get("reason", "no rejection.json saying why"))
            out.append(Checkpoint(step, "rejected", str(rejection.get("rejected_at", "")), reason))
        return sorted(out, key=lambda c: (c.step, c.state))

    # ---- change detection (live updates) --------------------------------------------------------
    def version(self, model: ModelRef | None = None) -> str:
        """A token that changes whenever something a page shows changes (sizes and modification times of
        the history, the trajectory folders and the checkpoints folder)."""
        if model is None:
            models, _ = self.models()
            return ";".join(f"{m.id}:{self.version(m)}" for m in models)
        parts = [model.dir / "history.jsonl", model.dir / "checkpoints", model.dir / "trajectories"]
        parts += [model.dir / "trajectories" / s for s in self.splits(model)]
        return ",".join(str(_stat_key(p)) for p in parts)

    def step_version(self, model: ModelRef, split: str, step: int) -> str:
        """A token that changes when the step's files change."""
        folder = model.dir / "trajectories" / split
        names = (f"{step:04d}.jsonl", f"{step:04d}.jsonl.gz", f"{step:04d}{TRAINER_RECORD_SUFFIX}")
        return ",".join(str(_stat_key(folder / n)) for n in names) + "|" + self.version(model)


def _subdirs(folder: Path) -> list[Path]:
    try:
        return sorted(p for p in folder.iterdir() if p.is_dir())
    except OSError:
        return []


def _looks_like_model(folder: Path) -> bool:
    return any((folder / n).exists() for n in ("model.json", "history.jsonl", "trajectories", "checkpoints"))


def _models_in(project: str, models_dir: Path) -> list[ModelRef]:
    if not NAME_PATTERN.match(project):
        return []
    return [
        ModelRef(project, p.name, p)
        for p in _subdirs(models_dir)
        if NAME_PATTERN.match(p.name) and _looks_like_model(p)
    ]


def _json_file(path: Path) -> Json | None:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def _scan(path: Path, what: str) -> tuple[list[Json], list[str]]:
    try:
        rows, problems = scan_jsonl(path)
    except OSError as e:
        return [], [f"could not read the {what} file {path}: {e.strerror or e}"]
    return [row for _, row in rows], problems


def _scan_groups(path: Path) -> tuple[list[Json], list[str]]:
    rows, problems = _scan(path, "trajectories")
    groups = []
    for i, row in enumerate(rows):
        if isinstance(row.get("trajectories"), list):
            groups.append(row)
        else:
            problems.append(f"{path}: group {i} has no `trajectories` list; skipped")
    return groups, problems


def _scan_records(path: Path) -> tuple[list[StepTrainerRecord], dict[str, Json], list[str]]:
    rows, problems = _scan(path, "trainer record")
    records: list[StepTrainerRecord] = []
    groups: dict[str, Json] = {}
    for i, row in enumerate(rows):
        raw = row.get("groups") if isinstance(row.get("groups"), list) else []
        try:
            records.append(StepTrainerRecord.model_validate({**row, "groups": []}))
        except ValueError as e:
            problems.append(f"{path}: record {i} is not a trainer record ({str(e).splitlines()[0]}); skipped")
            continue
        groups.update(
            {g["fingerprint"]: g for g in raw or [] if isinstance(g, dict) and g.get("fingerprint")}
        )
    return records, groups, problems


def split_of(metric: str, splits: list[str]) -> tuple[str, str]:
    """(split, name) of a history key: `val/reward` -> ("val", "reward"); keys of the metrics builder's
    sections (`time/step_wall_s`) and unknown prefixes keep their whole name under the split ""."""
    prefix, _, name = metric.partition("/")
    if name and (prefix in splits or prefix in ("train", "val", "test")) and prefix not in SECTIONS:
        return prefix, name
    return "", metric
