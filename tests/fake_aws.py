"""A stand-in for the AWS CLI's `s3` and `s3api` commands, over a folder instead of S3 (tests only).

`s3://bucket/key` is `$FAKE_S3_ROOT/bucket/key`. Every call is appended to `$FAKE_S3_ROOT/calls.jsonl`.
Implements what `art.utils.s3` runs: `[--profile P] s3 sync [--delete] [--exclude PAT]... SRC DST`,
`s3 cp SRC DST`, `s3 ls URI/`, `s3 presign URI [--expires-in N]` (a fake URL), `s3api head-bucket --bucket B`, `s3api create-bucket --bucket B`
(refused when `$FAKE_S3_FORBID` is set), with the real CLI's exit statuses for the cases tested.
"""

from __future__ import annotations

import fnmatch
import json
import os
import shutil
import sys
from pathlib import Path

ROOT = Path(os.environ["FAKE_S3_ROOT"])


def local(path: str) -> Path:
    return ROOT / path.removeprefix("s3://") if path.startswith("s3://") else Path(path)


def files(folder: Path, exclude: list[str]) -> dict[str, Path]:
    if not folder.is_dir():
        return {}
    found = {p.relative_to(folder).as_posix(): p for p in folder.rglob("*") if p.is_file()}
    return {k: v for k, v in found.items() if not any(fnmatch.fnmatch(k, pat) for pat in exclude)}


def main(argv: list[str]) -> int:
    ROOT.mkdir(parents=True, exist_ok=True)
    with (ROOT / "calls.jsonl").open("a") as log:
        log.write(json.dumps(argv) + "\n")
    if argv[:1] == ["--profile"]:
        argv = argv[2:]
    service, command, *rest = argv
    if service == "s3api":
        bucket = ROOT / rest[rest.index("--bucket") + 1]
        if command == "head-bucket":
            return 0 if bucket.is_dir() else 254
        if os.environ.get("FAKE_S3_FORBID"):
            print("An error occurred (AccessDenied) when calling the CreateBucket operation", file=sys.stderr)
            return 254
        bucket.mkdir()
        return 0
    if command == "presign":
        expires = rest[rest.index("--expires-in") + 1] if "--expires-in" in rest else "3600"
        if not local(rest[0]).is_file():
            print(f"(fake) no such object {rest[0]}", file=sys.stderr)
            return 255
        print(f"https://fake-s3.invalid/{rest[0].removeprefix('s3://')}?X-Amz-Expires={expires}")
        return 0
    if command == "ls":
        folder = local(rest[0])
        entries = sorted(p for p in folder.iterdir()) if folder.is_dir() else []
        for p in entries:
            print(
                f"                           PRE {p.name}/"
                if p.is_dir()
                else f"2026-01-01 00:00:00  1 {p.name}"
            )
        return 0 if entries else 1
    exclude = [rest[i + 1] for i, a in enumerate(rest) if a == "--exclude"]
    paths = [
        a for i, a in enumerate(rest) if not a.startswith("--") and (i == 0 or rest[i - 1] != "--exclude")
    ]
    source, destination = local(paths[0]), local(paths[1])
    if command == "cp":
        destination.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(source, destination)
        return 0
    if not paths[0].startswith("s3://") and not source.exists():
        print(f"The user-provided path {paths[0]} does not exist.", file=sys.stderr)
        return 255
    wanted = files(source, exclude)
    for rel, path in wanted.items():
        (destination / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(path, destination / rel)
    if "--delete" in rest:
        for rel, path in files(destination, exclude).items():
            if rel not in wanted:
                path.unlink()
        for folder in sorted((p for p in destination.rglob("*") if p.is_dir()), reverse=True):
            if not any(folder.iterdir()):  # S3 has no empty folders: a prefix exists while it holds objects
                folder.rmdir()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
