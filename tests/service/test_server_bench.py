"""The serving benchmark: its quick mode runs end to end (so the script never rots); its full run meets
its target, 32 concurrent requests >= 3x one at a time (marked `bench`: `python -m pytest -m bench`)."""

from __future__ import annotations

import pytest
from helpers_bench import assert_ran, assert_targets_met, run_script

pytest.importorskip("torch")


@pytest.mark.slow
def test_bench_serving_quick_prints_the_table() -> None:
    result = run_script("bench_serving.py", "--quick", "--threads", "1", timeout=300)
    assert_ran(result)
    out = result.stdout
    assert "| (a) one request at a time" in out and "| (b) 32 concurrent" in out, result.stderr[-2000:]
    assert "target: concurrent >= 3x one-at-a-time: " in out


@pytest.mark.bench
def test_bench_serving_meets_its_target_on_the_default_model() -> None:
    assert_targets_met(run_script("bench_serving.py", timeout=3600))
