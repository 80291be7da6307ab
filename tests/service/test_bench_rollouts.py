"""The rollout benchmark's quick mode runs end to end and prints every row (so the script never rots)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("torch")

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "bench_rollouts.py"


@pytest.mark.slow
def test_bench_rollouts_quick_prints_the_table_with_ratios() -> None:
    result = subprocess.run(
        [sys.executable, str(SCRIPT), "--quick", "--threads", "1"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    out = result.stdout
    for row in ("compute limit (matmul probe)", "HF generate, batch 8", "HF generate, batch 32", "ours"):
        assert f"| {row}" in out or row in out, f"missing row {row!r}\n{out}\n{result.stderr[-2000:]}"
    ours = next(line for line in out.splitlines() if "(ours)" in line)
    cells = [c.strip() for c in ours.strip("|").split("|")]
    assert int(cells[2]) == 32 * 24  # every request generated exactly max_tokens (ignore_eos)
    assert float(cells[4]) > 0
    p50, p90 = (float(x) for x in cells[5].split("/"))
    assert 0 < p50 <= p90
    ratios = re.findall(r"target: ours >= [\d.]+x ([\w -]+): (?:met|NOT met) \(([\d.]+)x\)", out)
    assert {name for name, _ in ratios} >= {"compute limit", "HF generate batch 8", "HF generate batch 32"}
    assert result.returncode in (0, 1)
