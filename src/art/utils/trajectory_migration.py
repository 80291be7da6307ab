"""JSON-lines trajectory files to the reference ART's Parquet files, and its older JSONL helpers
(`art.utils.trajectory_migration`, the same names and signatures as the reference's).

The reference moved its trajectory logs from JSONL to Parquet; these functions convert files in place:
`migrate_jsonl_to_parquet` (one file), `migrate_trajectories_dir` (a `trajectories/` folder, every split),
`migrate_model_dir` and `migrate_all_models` (a project's models). Each returns a `MigrationResult`
(files converted and skipped, bytes before and after, errors: a bad file is an error in the result, never
an exception, and leaves no half-written Parquet file).

Ours differ from the reference in what they read: any line our storage writes (a `TrajectoryGroup` as
JSON, Choices with logprobs included) or the reference wrote. Careful: like the reference's, these delete
the JSONL files by default (`delete_original=True`), and our JSONL is the lossless record (token ids and
logprobs, which Parquet does not keep). ART already writes a Parquet copy of every step beside its JSONL
(`Model.log`), so there is rarely a reason to migrate; pass `delete_original=False` to keep the JSONL.

Needs pyarrow: `pip install 'agent-reinforcement-trainer[parquet]'`.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from openai.types.chat.chat_completion import Choice
from pydantic import ValidationError

from art.record.parquet import write_trajectory_groups_parquet
from art.trajectories import History, MessageOrChoice, Trajectory, TrajectoryGroup

# ---- the reference's older JSONL helpers -------------------------------------------------------------


def message_or_choice_to_dict(item: MessageOrChoice) -> dict[str, Any]:
    """A message as a plain dict; a Choice as its own dict without logprobs (the reference's legacy form)."""
    if isinstance(item, Choice):
        data = item.model_dump(mode="json", exclude_none=True)
        data.pop("logprobs", None)
        return data
    out = dict(item)
    if "content" in out and not isinstance(out["content"], str | list | None):
        out["content"] = list(out["content"])  # an iterator of content parts
    return out


def history_to_dict(history: History) -> dict[str, Any]:
    """An additional history as `{"messages_and_choices", "tools"}`."""
    return {
        "messages_and_choices": [message_or_choice_to_dict(m) for m in history.messages_and_choices],
        "tools": history.tools,
    }


def trajectory_to_dict(trajectory: Trajectory) -> dict[str, Any]:
    """A trajectory as the reference's legacy JSONL wrote it (no logprobs, no token ids)."""
    return {
        "reward": trajectory.reward,
        "metrics": dict(trajectory.metrics),
        "metadata": dict(trajectory.metadata),
        "messages_and_choices": [message_or_choice_to_dict(m) for m in trajectory.messages_and_choices],
        "tools": trajectory.tools,
        "additional_histories": [history_to_dict(h) for h in trajectory.additional_histories],
        "logs": list(trajectory.logs),
    }


def trajectory_group_to_dict(group: TrajectoryGroup) -> dict[str, Any]:
    """A group as `{"trajectories": [...]}` (exceptions are left out, as in the reference)."""
    return {"trajectories": [trajectory_to_dict(t) for t in group.trajectories]}


def serialize_trajectory_groups(trajectory_groups: list[TrajectoryGroup]) -> str:
    """Groups as the reference's legacy JSONL text, one group per line."""
    return "\n".join(json.dumps(trajectory_group_to_dict(g)) for g in trajectory_groups)


def dict_to_message_or_choice(data: dict[str, Any]) -> MessageOrChoice:
    """A dict with a `message` is a Choice; anything else a plain message."""
    return Choice.model_validate(data) if "message" in data else data


def dict_to_trajectory(data: dict[str, Any]) -> Trajectory:
    """A trajectory from the legacy JSONL form (see `trajectory_to_dict`)."""
    return Trajectory(
        messages_and_choices=[dict_to_message_or_choice(m) for m in data["messages_and_choices"]],
        reward=data["reward"],
        metrics=data.get("metrics") or {},
        metadata=data.get("metadata") or {},
        logs=data.get("logs") or [],
    )


def dict_to_trajectory_group(data: dict[str, Any]) -> TrajectoryGroup:
    """A group from the legacy JSONL form."""
    return TrajectoryGroup(trajectories=[dict_to_trajectory(t) for t in data["trajectories"]], exceptions=[])


def deserialize_trajectory_groups(serialized: str) -> list[TrajectoryGroup]:
    """Groups from legacy JSONL text (one group per line). The reference also read an older YAML form; a
    text that is not JSON lines is a `ValueError` here, naming the line."""
    groups = []
    for number, line in enumerate(serialized.strip().split("\n"), start=1):
        if not line.strip():
            continue
        try:
            data = json.loads(line)
        except json.JSONDecodeError as e:
            raise ValueError(f"line {number} is not JSON ({e.msg}); the YAML form is not read here") from None
        groups.append(dict_to_trajectory_group(data))
    return groups


# ---- migration ---------------------------------------------------------------------------------------


@dataclass
class MigrationResult:
    """What a migration did: files converted and skipped, bytes before and after, and errors (one line
    per file that could not be converted)."""

    files_migrated: int = 0
    files_skipped: int = 0
    bytes_before: int = 0
    bytes_after: int = 0
    errors: list[str] = field(default_factory=list)

    @property
    def compression_ratio(self) -> float:
        """Bytes before / bytes after (0 when nothing was written)."""
        return self.bytes_before / self.bytes_after if self.bytes_after else 0.0

    @property
    def space_saved(self) -> int:
        """Bytes before minus bytes after."""
        return self.bytes_before - self.bytes_after

    def __add__(self, other: MigrationResult) -> MigrationResult:
        return MigrationResult(
            files_migrated=self.files_migrated + other.files_migrated,
            files_skipped=self.files_skipped + other.files_skipped,
            bytes_before=self.bytes_before + other.bytes_before,
            bytes_after=self.bytes_after + other.bytes_after,
            errors=self.errors + other.errors,
        )


def _read_groups(path: Path) -> list[TrajectoryGroup]:
    groups = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            data = json.loads(line)
            groups.append(TrajectoryGroup.model_validate(data))
        except (json.JSONDecodeError, ValidationError, TypeError, ValueError) as e:
            raise ValueError(f"line {number}: {str(e).splitlines()[0]}") from None
    return groups


def migrate_jsonl_to_parquet(
    jsonl_path: Path | str, delete_original: bool = True, dry_run: bool = False
) -> MigrationResult:
    """Convert one `.jsonl` trajectory file to a `.parquet` file beside it (the reference's schema, zstd).

    A missing file is an error in the result; a file not named `.jsonl` is skipped; `dry_run` only counts
    (the size after is estimated at 1/25, as the reference does). With `delete_original` the JSONL file is
    removed once the Parquet file is whole.

        result = migrate_jsonl_to_parquet(".art/p/models/m/trajectories/train/0003.jsonl", delete_original=False)
    """
    path = Path(jsonl_path)
    result = MigrationResult()
    if not path.exists():
        result.errors.append(f"File not found: {path}")
        return result
    if path.suffix != ".jsonl":
        result.files_skipped += 1
        return result
    result.bytes_before = path.stat().st_size
    if dry_run:
        result.files_migrated = 1
        result.bytes_after = result.bytes_before // 25
        return result
    parquet = path.with_suffix(".parquet")
    partial = parquet.with_name(parquet.name + ".partial")
    try:
        write_trajectory_groups_parquet(_read_groups(path), partial)
        partial.replace(parquet)
    except (OSError, ValueError) as e:
        partial.unlink(missing_ok=True)
        result.errors.append(f"Error migrating {path}: {e}")
        return result
    result.bytes_after = parquet.stat().st_size
    result.files_migrated = 1
    if delete_original:
        path.unlink()
    return result


def migrate_trajectories_dir(
    trajectories_dir: Path | str,
    delete_originals: bool = True,
    dry_run: bool = False,
    progress_callback: Callable[[str], None] | None = None,
) -> MigrationResult:
    """Convert every `.jsonl` file under `trajectories_dir` (every split); `progress_callback(path)` is
    called before each."""
    folder = Path(trajectories_dir)
    result = MigrationResult()
    if not folder.exists():
        result.errors.append(f"Directory not found: {folder}")
        return result
    for path in sorted(folder.rglob("*.jsonl")):
        if progress_callback is not None:
            progress_callback(str(path))
        result = result + migrate_jsonl_to_parquet(path, delete_original=delete_originals, dry_run=dry_run)
    return result


def migrate_model_dir(
    model_dir: Path | str,
    delete_originals: bool = True,
    dry_run: bool = False,
    progress_callback: Callable[[str], None] | None = None,
) -> MigrationResult:
    """Convert a model folder's `trajectories/` (nothing to do when it has none)."""
    trajectories = Path(model_dir) / "trajectories"
    if not trajectories.exists():
        return MigrationResult()
    return migrate_trajectories_dir(trajectories, delete_originals, dry_run, progress_callback)


def migrate_all_models(
    art_path: Path | str,
    project_name: str,
    delete_originals: bool = True,
    dry_run: bool = False,
    progress_callback: Callable[[str], None] | None = None,
) -> MigrationResult:
    """Convert every model of `{art_path}/{project_name}/models/`."""
    models = Path(art_path) / project_name / "models"
    result = MigrationResult()
    if not models.exists():
        result.errors.append(f"Directory not found: {models}")
        return result
    for model_dir in sorted(p for p in models.iterdir() if p.is_dir()):
        result = result + migrate_model_dir(model_dir, delete_originals, dry_run, progress_callback)
    return result


__all__ = [
    "MigrationResult",
    "deserialize_trajectory_groups",
    "dict_to_trajectory",
    "dict_to_trajectory_group",
    "history_to_dict",
    "message_or_choice_to_dict",
    "migrate_all_models",
    "migrate_jsonl_to_parquet",
    "migrate_model_dir",
    "migrate_trajectories_dir",
    "serialize_trajectory_groups",
    "trajectory_group_to_dict",
    "trajectory_to_dict",
]
