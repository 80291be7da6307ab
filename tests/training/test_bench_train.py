"""The ours-vs-TRL training benchmark, all `bench` (excluded from the default run; `python -m pytest -m bench`):
its quick mode runs end to end and prints both rows and a ratio; its full run meets the >= 2x target."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("torch", reason="needs the `local` extra")
pytest.importorskip("trl", reason="needs the `dev` extra (trl)")

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "bench_train.py"


@pytest.mark.bench  # 75 s of CPU (TRL's trainer too): see tests/helpers_bench.py
def test_bench_train_quick() -> None:
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "WANDB_MODE": "disabled"}
    result = subprocess.run(
        [sys.executable, str(SCRIPT), "--quick"], capture_output=True, text=True, timeout=900, env=env
    )
    out = result.stdout
    assert result.returncode == 0, out + result.stderr
    assert re.search(r"^ours \(Trainer\.train_step\)\s+\d+\.\d+", out, re.M), out
    assert re.search(r"^TRL\s+\d+\.\d+", out, re.M), out
    assert re.search(r"ratio: ours is (\d+\.\d+)x faster than .* \(target >= 2x: (met|NOT met)\)", out), out
    for expected in ("GFLOP/s", "projections at M=", "overhead of our step", "cpu flags:", "threads"):
        assert expected in out, out


@pytest.mark.bench
def test_a_training_step_is_at_least_twice_as_fast_as_trl() -> None:
    """The README's claim (2.1-2.6x) on the default model; the script's own target is >= 2x."""
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "WANDB_MODE": "disabled"}
    result = subprocess.run(
        [sys.executable, str(SCRIPT)], capture_output=True, text=True, timeout=7200, env=env
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert "(target >= 2x: met)" in result.stdout, result.stdout[-3000:]
