"""The memory benchmark, all `bench` (excluded from the default run; `python -m pytest -m bench`): its quick
mode runs the demo loop end to end and prints its table (so the script never rots); its full run keeps the
promise of flat memory, under 5 MiB of RSS growth per step over 20 steps of the default model, and an
overhead under 5% of a step. A tiny model's 4 quick steps say nothing about growth, so the quick test does
not pretend to check it."""

from __future__ import annotations

import pytest
from helpers_bench import assert_ran, assert_targets_met, run_script

pytest.importorskip("torch")


@pytest.mark.bench  # 26 s of CPU: see tests/helpers_bench.py
def test_bench_memory_quick_reports_rss_per_iteration_and_growth() -> None:
    result = run_script("bench_memory.py", "--quick", "--steps", "4", timeout=600)
    assert_ran(result)
    out = result.stdout
    assert out.count("iteration ") >= 4, out + result.stderr[-2000:]
    assert "| peak RSS of the run" in out and "target: no growth (< 5 MiB per step): " in out


@pytest.mark.bench
def test_bench_memory_is_flat_over_20_steps_of_the_default_model() -> None:
    result = run_script("bench_memory.py", timeout=7200)
    assert_targets_met(result)
    assert "target: overhead < 5% of a step: met" in result.stdout, result.stdout[-3000:]
