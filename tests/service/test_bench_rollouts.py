"""The rollout benchmark: its quick mode runs end to end and prints every row (so the script never rots);
its full run meets its targets (marked `bench`: run on a quiet machine with `python -m pytest -m bench`)."""

from __future__ import annotations

import re

import pytest
from helpers_bench import assert_ran, assert_targets_met, run_script

pytest.importorskip("torch")

TARGET = re.compile(r"target: ours >= [\d.]+x ([\w -]+): (?:met|NOT met) \(([\d.]+)x\)")


@pytest.mark.slow
def test_bench_rollouts_quick_prints_the_table_with_ratios() -> None:
    result = run_script("bench_rollouts.py", "--quick", "--threads", "1", timeout=300)
    assert_ran(result)
    out = result.stdout
    for row in ("compute limit (matmul probe)", "HF generate, batch 8", "HF generate, batch 32", "ours"):
        assert f"| {row}" in out or row in out, f"missing row {row!r}\n{out}\n{result.stderr[-2000:]}"
    ours = next(line for line in out.splitlines() if "(ours)" in line)
    cells = [c.strip() for c in ours.strip("|").split("|")]
    assert int(cells[2]) == 32 * 24  # every request generated exactly max_tokens (ignore_eos)
    assert float(cells[4]) > 0
    p50, p90 = (float(x) for x in cells[5].split("/"))
    assert 0 < p50 <= p90
    assert {name for name, _ in TARGET.findall(out)} >= {
        "compute limit",
        "HF generate batch 8",
        "HF generate batch 32",
    }


@pytest.mark.bench
def test_bench_rollouts_meets_its_targets_on_the_default_model() -> None:
    """>= 0.5x the compute limit, >= 3x HF generate at batch 8, >= 1.4x at batch 32 (README's claims)."""
    assert_targets_met(run_script("bench_rollouts.py", timeout=3600))
