"""The decode-attention benchmark: its quick mode times every row (each checked against eager torch by the
script) and prints ratios against ours; its full run keeps the promise that our C++ kernel is faster than
both torch paths it replaced at every context length (marked `bench`: `python -m pytest -m bench`)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
from helpers_bench import run_script

pytest.importorskip("torch")

REPO = Path(__file__).resolve().parents[3]
CELL = re.compile(r"([\d.]+) \(\s*([\d.]+)x\)")


def _rows(stdout: str) -> dict[str, list[tuple[float, float]]]:
    """row name -> [(ms per step, ratio to ours)] per context length."""
    rows = {}
    for line in stdout.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if (
            line.startswith("| ")
            and "attention" not in cells[0]
            and all(CELL.fullmatch(c) for c in cells[1:])
        ):
            rows[cells[0]] = [tuple(float(x) for x in CELL.fullmatch(c).groups()) for c in cells[1:]]  # type: ignore[union-attr]
    return rows  # type: ignore[return-value]


def test_bench_attention_quick_prints_every_row_with_ratios_against_ours() -> None:
    result = run_script("bench_attention.py", "--quick")
    assert result.returncode == 0, result.stderr[-3000:]  # also fails when a row computes something else
    rows = _rows(result.stdout)
    assert set(rows) == {"C++ kernel (ours)", "eager torch", "SDPA"}, result.stdout
    ours = rows["C++ kernel (ours)"]
    for name in ("eager torch", "SDPA"):  # each ratio is that row's time over ours at the same length
        for (ms, ratio), (ours_ms, _) in zip(rows[name], ours, strict=True):
            low, high = (ms - 0.005) / (ours_ms + 0.005), (ms + 0.005) / max(ours_ms - 0.005, 1e-9)
            assert low - 0.006 <= ratio <= high + 0.006, (name, result.stdout)  # times print to 0.01 ms


@pytest.mark.skipif(not (REPO / ".git").exists(), reason="needs the git history (a clone, not an export)")
def test_bench_attention_builds_the_kernel_of_an_earlier_revision() -> None:
    result = subprocess.run(
        [sys.executable, str(REPO / "benchmarks" / "bench_attention.py"), "--quick", "--against", "HEAD"],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert "C++ kernel at HEAD" in _rows(result.stdout), result.stdout


@pytest.mark.bench
def test_our_decode_attention_is_faster_than_eager_torch_and_sdpa() -> None:
    result = run_script("bench_attention.py")
    assert result.returncode == 0, result.stderr[-3000:]
    rows = _rows(result.stdout)
    for name in ("eager torch", "SDPA"):
        assert all(ratio > 1.0 for _, ratio in rows[name]), result.stdout
