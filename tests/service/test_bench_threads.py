"""The thread-layout benchmark's quick mode runs both layouts end to end and prints its table."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("torch")

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "bench_threads.py"


@pytest.mark.slow
def test_bench_threads_quick_prints_both_layouts_and_the_ratios() -> None:
    result = subprocess.run(
        [sys.executable, str(SCRIPT), "--quick", "--rounds", "1"], capture_output=True, text=True, timeout=600
    )
    assert result.returncode == 0, result.stderr[-3000:]
    rows = {}
    for line in result.stdout.splitlines():
        cells = [c.strip() for c in line.strip("|").split("|")]
        if len(cells) == 4 and cells[0] in ("one thread (ours)", "two threads (before)"):
            rows[cells[0]] = [float(c) for c in cells[1:]]
    assert set(rows) == {"one thread (ours)", "two threads (before)"}, result.stdout
    assert all(v > 0 for values in rows.values() for v in values)
    assert "one thread vs two (median over rounds): decode step" in result.stdout
