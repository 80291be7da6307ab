"""The memory benchmark's quick mode runs the demo loop end to end and prints its table."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("torch")

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "bench_memory.py"


@pytest.mark.slow
def test_bench_memory_quick_reports_rss_per_iteration_and_growth() -> None:
    result = subprocess.run(
        [sys.executable, str(SCRIPT), "--quick", "--steps", "4"], capture_output=True, text=True, timeout=600
    )
    out = result.stdout
    assert out.count("iteration ") >= 4, out + result.stderr[-2000:]
    assert "| peak RSS of the run" in out
    growth = float(out.split("target: no growth (< 5 MiB per step): ")[1].split("(")[1].rstrip(")\n"))
    peak = float(out.split("| peak RSS of the run (the largest any step needed) | ")[1].split(" ")[0])
    assert 100 < peak < 8192
    assert abs(growth) < 1000
    assert result.returncode in (0, 1)
