"""The serving benchmark's quick mode runs end to end (so the script never rots)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("torch")

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "bench_serving.py"


@pytest.mark.slow
def test_bench_serving_quick_prints_the_table() -> None:
    result = subprocess.run(
        [sys.executable, str(SCRIPT), "--quick", "--threads", "1"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    out = result.stdout
    assert "| (a) one request at a time" in out and "| (b) 32 concurrent" in out, result.stderr[-2000:]
    ratio = float(out.split("target: concurrent >= 3x one-at-a-time: ")[1].split("(")[1].split("x)")[0])
    assert ratio > 1.0  # the 3x target is reported, not asserted: a shared machine is noisy
    assert result.returncode in (0, 1)
