"""The decode-attention benchmark's quick mode times every row and prints the ratios."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("torch")

REPO = Path(__file__).resolve().parents[3]
SCRIPT = REPO / "benchmarks" / "bench_attention.py"


def _rows(stdout: str) -> dict[str, list[str]]:
    rows = {}
    for line in stdout.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 3 and line.startswith("| ") and "attention" not in cells[0]:
            rows[cells[0]] = cells[1:]
    return rows


def test_bench_attention_quick_prints_every_row_with_ratios_against_ours() -> None:
    result = subprocess.run(
        [sys.executable, str(SCRIPT), "--quick"], capture_output=True, text=True, timeout=600
    )
    assert result.returncode == 0, result.stderr[-3000:]
    rows = _rows(result.stdout)
    assert set(rows) == {"C++ kernel (ours)", "eager torch", "SDPA"}, result.stdout
    assert all(cell.endswith("1.00x)") for cell in rows["C++ kernel (ours)"])


@pytest.mark.skipif(not (REPO / ".git").exists(), reason="needs the git history (a clone, not an export)")
def test_bench_attention_builds_the_kernel_of_an_earlier_revision() -> None:
    result = subprocess.run(
        [sys.executable, str(SCRIPT), "--quick", "--against", "HEAD"],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert "C++ kernel at HEAD" in _rows(result.stdout), result.stdout
