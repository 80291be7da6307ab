"""Durable files of the record: whole files written atomically (temp, fsync, rename), JSON lines appended
and read back whatever a crash left (a torn last line skipped with a warning, a torn gzip member repaired),
and what a refusing disk said (`storage_error`, `disk_said`). Knows no path of the record: `storage` does.
"""

from __future__ import annotations

import errno
import gzip
import json
import os
import tempfile
import warnings
import zlib
from collections.abc import Sequence
from pathlib import Path
from typing import Any

STORAGE_ERRNOS = frozenset(
    getattr(errno, name) for name in ("ENOSPC", "EDQUOT", "EROFS", "EIO", "EFBIG") if hasattr(errno, name)
)
"""errno values that mean the disk refused a write (full, over quota, read-only, failing): storage errors."""


def storage_error(exc: BaseException | None) -> OSError | None:
    """The OSError with a storage errno (`STORAGE_ERRNOS`) that `exc` is or was caused by, else None.

    Example:
        storage_error(OSError(errno.ENOSPC, "No space left on device"))  # that OSError
    """
    seen: set[int] = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        if isinstance(exc, OSError) and exc.errno in STORAGE_ERRNOS:
            return exc
        exc = exc.__cause__ or exc.__context__
    return None


def disk_said(error: OSError) -> str:
    """What the disk said, in words and without paths: "No space left on device (ENOSPC)"."""
    name = errno.errorcode.get(error.errno or 0, str(error.errno))
    return f"{error.strerror or os.strerror(error.errno or 0)} ({name})"


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


def atomic_write_text(path: Path, text: str, *, durable: bool = True) -> None:
    """Write a whole file atomically: temp file in the same folder, fsync, rename (see `atomic_write_bytes`)."""
    atomic_write_bytes(path, text.encode("utf-8"), durable=durable)


def atomic_write_bytes(path: Path, data: bytes, *, durable: bool = True) -> None:
    """Write a whole file atomically: temp file in the same folder, fsync, rename.

    `durable=False` skips the fsyncs (~15 ms here): still all or nothing for a crash of the process, which
    leaves the page cache to the OS, but not for a crash of the machine."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            if durable:
                f.flush()
                os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    if durable:
        _fsync_dir(path.parent)


def _gunzip_tolerant(data: bytes) -> tuple[bytes, int | None]:
    """The text of every gzip member of `data`; when the last member is incomplete (a torn write), what it
    holds so far and the offset where it starts (else None)."""
    out: list[bytes] = []
    pos = 0
    while pos < len(data):
        member = zlib.decompressobj(wbits=31)
        try:
            out.append(member.decompress(data[pos:]))
        except zlib.error:
            return b"".join(out), pos
        if not member.eof:
            return b"".join(out), pos
        pos = len(data) - len(member.unused_data)
    return b"".join(out), None


def _jsonl_text(path: Path) -> tuple[str, str | None]:
    """The text of a JSON-lines file (plain or .gz) and, when its gzip data ends torn, what was wrong."""
    raw = path.read_bytes()
    problem = None
    if path.suffix == ".gz":
        raw, torn_at = _gunzip_tolerant(raw)
        if torn_at is not None:
            problem = (
                f"{path}: the last write was interrupted (incomplete gzip data from byte {torn_at}); "
                "reading what it holds"
            )
    return raw.decode("utf-8", errors="replace"), problem  # we write ASCII JSON; only a torn line is invalid


def scan_jsonl(path: str | os.PathLike[str]) -> tuple[list[tuple[int, dict[str, Any]]], list[str]]:
    """(line number, object) for every readable line of a JSON-lines file (plain or .gz), and a sentence for
    each part that could not be read (a torn or unfinished line, torn gzip data), never raising for those.

    Example:
        rows, problems = scan_jsonl(".art/demo/models/agent-001/history.jsonl")
    """
    p = Path(path)
    text, torn = _jsonl_text(p)
    problems = [torn] if torn else []
    out: list[tuple[int, dict[str, Any]]] = []
    lines = text.split("\n")
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            value = json.loads(line)
        except json.JSONDecodeError:
            value = None
        if not isinstance(value, dict):
            unfinished = number == len(lines)  # no newline yet: a write in progress, or torn by a crash
            problems.append(
                f"{p}: line {number} is not a complete JSON object "
                f"({'still being written, or ' if unfinished else ''}a write interrupted by a crash?); skipped"
            )
            continue
        out.append((number, value))
    return out, problems


def read_jsonl(path: str | os.PathLike[str]) -> list[tuple[int, dict[str, Any]]]:
    """(line number, object) for every line of a JSON-lines file (plain or .gz), in order.

    A line that is not a JSON object (a write torn by a crash) is skipped with a warning naming the file and
    the line; the lines after it are read as usual.

    Example:
        for line_number, row in read_jsonl(".art/demo/models/agent-001/history.jsonl"):
            print(line_number, row["step"])
    """
    rows, problems = scan_jsonl(path)
    for problem in problems:
        warnings.warn(problem, stacklevel=2)
    return rows


def append_jsonl(path: Path, lines: Sequence[str]) -> None:
    """Append JSON lines (each without its newline) durably: flushed and fsynced before returning.

    If the file's last write was torn by a crash, the new lines still start on a line of their own (the
    torn fragment stays a line by itself, which readers skip); a gzip file's incomplete last member is first
    rewritten (atomically) as a complete one holding what it had, so the members after it stay readable.
    """
    if not lines:
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    body = "".join(line + "\n" for line in lines).encode("utf-8")
    if path.suffix == ".gz":
        prefix = b""
        if path.exists() and path.stat().st_size > 0:
            text, torn_at = _gunzip_tolerant(path.read_bytes())
            if torn_at is not None:
                if text and not text.endswith(b"\n"):
                    text += b"\n"  # the torn fragment stays a line of its own
                warnings.warn(
                    f"{path}: the last write was interrupted (incomplete gzip data from byte {torn_at}); "
                    "rewrote the file with what it held before appending",
                    stacklevel=2,
                )
                atomic_write_bytes(path, gzip.compress(text))
            elif text and not text.endswith(b"\n"):
                prefix = b"\n"
        # gzip files may hold several members; readers see them as one stream.
        with open(path, "ab") as raw:
            raw.write(gzip.compress(prefix + body))
            raw.flush()
            os.fsync(raw.fileno())
        return
    with open(path, "a+b") as f:
        if f.seek(0, os.SEEK_END) > 0:
            f.seek(-1, os.SEEK_END)
            if f.read(1) != b"\n":
                body = b"\n" + body
        f.write(body)
        f.flush()
        os.fsync(f.fileno())
