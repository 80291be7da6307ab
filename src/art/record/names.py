"""Names that become paths (project, model, split): only `[A-Za-z0-9._-]`, never `.` or `..`, short enough
for the filesystem, not a device name on Windows (`validate_name`)."""

from __future__ import annotations

import os
import re
from pathlib import Path

NAME_PATTERN = re.compile(r"^[A-Za-z0-9._-]+$")


# A folder or file name: 255 bytes on ext4, xfs, btrfs, APFS, NTFS (less on some, e.g. eCryptfs: 143).
NAME_MAX = 255


# The longest path the record puts under a model's folder, e.g.
# "checkpoints/rejected/0001-20250101T000000000000Z/.adapter_model.safetensors.abcdefgh" (84) with room.
LONGEST_SUFFIX = 128


_WINDOWS_RESERVED = {
    "CON",
    "PRN",
    "AUX",
    "NUL",
    *(f"COM{i}" for i in range(1, 10)),
    *(f"LPT{i}" for i in range(1, 10)),
}


def validate_name(value: str, field: str) -> str:
    """Refuse names that would not be safe as one path component on this filesystem. Returns `value`.

    Example:
        validate_name("agent-001", "model name")  # "agent-001"
        validate_name("a" * 300, "model name")    # ValueError: ... at most 255 ... (NAME_MAX)
    """
    if not isinstance(value, str) or not value:
        raise ValueError(f"{field} must be a non-empty string of letters, digits, '.', '_' and '-'")
    if value in (".", "..") or not NAME_PATTERN.match(value):
        raise ValueError(
            f"{field} {value!r} is not allowed: use only letters, digits, '.', '_' and '-' "
            "(and not '.' or '..' alone), because it becomes a folder name"
        )
    if len(value) > NAME_MAX:
        raise ValueError(
            f"{field} is {len(value)} characters long; at most {NAME_MAX} are allowed, because it becomes a "
            f"folder name and filesystems limit a name to {NAME_MAX} bytes (NAME_MAX). Use a shorter {field}."
        )
    if os.name == "nt" and (value.split(".")[0].upper() in _WINDOWS_RESERVED or value.endswith(".")):
        raise ValueError(
            f"{field} {value!r} is not allowed on Windows (a reserved device name, or a trailing '.', "
            "which Windows drops from folder names); use another name"
        )
    return value


def _nearest_existing(path: Path) -> Path:
    for candidate in (path, *path.parents):
        if os.path.exists(candidate):  # False, not OSError, for a path too long to look up
            return candidate
    return Path.cwd()


def _pathconf(path: Path, name: str, default: int) -> int:
    try:
        value = os.pathconf(path, name)
    except (AttributeError, OSError, ValueError):  # no pathconf (Windows) or no limit known
        return default
    return value if value > 0 else default
