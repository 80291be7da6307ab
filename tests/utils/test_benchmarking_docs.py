"""docs/benchmarking.md's example runs as printed: it writes both charts and prints the table."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

import art

pytest.importorskip("polars", reason="needs the `benchmarking` extra")
pytest.importorskip("matplotlib", reason="needs the `benchmarking` extra")

DOC = Path(__file__).resolve().parents[2] / "docs" / "benchmarking.md"


def test_the_documented_example_draws_both_charts(tmp_path: Path) -> None:
    (code,) = re.findall(r"```python\n(.*?)```", DOC.read_text(encoding="utf-8"), flags=re.DOTALL)
    (tmp_path / "example.py").write_text(code)
    src = str(Path(art.__file__).resolve().parents[1])
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([src, os.environ.get("PYTHONPATH", "")]),
        "MPLBACKEND": "Agg",
    }
    done = subprocess.run(
        [sys.executable, "example.py"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr[-3000:]
    for name in ("win-progress.png", "win-bars.png"):
        assert (tmp_path / name).read_bytes()[:4] == b"\x89PNG", name
    assert "agent-001" in done.stdout and "gpt-4o" in done.stdout and "metric_win" in done.stdout
    assert (
        tmp_path / ".art" / "tic-tac-toe" / "models" / "agent-001" / "trajectories" / "val" / "0004.jsonl"
    ).exists()
    assert not (tmp_path / "data").exists()  # no cache database, unlike the reference
