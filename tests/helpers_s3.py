"""Put a stand-in `aws` CLI (tests/fake_aws.py, "S3" kept in a folder) first on PATH for a test."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

FAKE_AWS = Path(__file__).with_name("fake_aws.py")


def install_fake_aws(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Returns the folder that plays S3 (`s3://bucket/key` is `folder/bucket/key`)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    aws = bin_dir / "aws"
    aws.write_text(f'#!/bin/sh\nexec "{sys.executable}" "{FAKE_AWS}" "$@"\n')
    aws.chmod(0o755)
    root = tmp_path / "s3"
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("FAKE_S3_ROOT", str(root))
    monkeypatch.delenv("BACKUP_BUCKET", raising=False)
    return root


def aws_calls(root: Path) -> list[list[str]]:
    """Every `aws` command line run so far, in order."""
    return [json.loads(line) for line in (root / "calls.jsonl").read_text().splitlines()]
