"""benchmarks/bench_ui.py --quick runs (a synthetic record, the real `art ui`, every page fetched): the
script never rots. The full run's promise (every page under 1 s on 1,000 steps x 512 trajectories) is
quoted in docs/ui.md."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("fastapi", reason="needs the `local` extra: pip install -e '.[local]'")

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "bench_ui.py"


def test_bench_ui_quick_fetches_every_page() -> None:
    done = subprocess.run(
        [sys.executable, str(SCRIPT), "--quick"], capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stdout + done.stderr
    rows = [line for line in done.stdout.splitlines() if line.rstrip().split()[-4:-3] == ["200"]]
    assert len(rows) == 10, done.stdout
    assert "slowest page:" in done.stdout
