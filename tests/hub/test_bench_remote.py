"""The remote-overhead benchmark's quick mode runs both backends side by side and prints the overhead."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("torch")

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "bench_remote.py"


@pytest.mark.slow
def test_bench_remote_quick_prints_both_backends_and_the_overhead() -> None:
    result = subprocess.run(
        [sys.executable, str(SCRIPT), "--quick"], capture_output=True, text=True, timeout=1200
    )
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-3000:]
    out = result.stdout
    steps = [line.split() for line in out.splitlines() if re.match(r"^\s+\d+\s+(local|remote)\s", line)]
    assert [int(cells[0]) for cells in steps] == [0, 1, 2]
    assert all(float(c) > 0 for cells in steps for c in cells[2:6])
    overhead = re.search(r"remote overhead:\s+(-?[\d.]+) ms = (-?[\d.]+)% of the local step", out)
    assert overhead is not None, out
    assert re.search(r"remote / local wall:\s+[\d.]+x", out)
