"""The ours-vs-TRL training benchmark's quick mode runs end to end and prints both rows and a ratio."""

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


@pytest.mark.slow
def test_bench_train_quick() -> None:
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "WANDB_MODE": "disabled"}
    result = subprocess.run(
        [sys.executable, str(SCRIPT), "--quick"], capture_output=True, text=True, timeout=300, env=env
    )
    out = result.stdout
    assert result.returncode == 0, out + result.stderr
    assert re.search(r"^ours \(Trainer\.train_step\)\s+\d+\.\d+", out, re.M), out
    assert re.search(r"^TRL\s+\d+\.\d+", out, re.M), out
    ratio = re.search(r"ratio: ours is (\d+\.\d+)x faster", out)
    assert ratio and float(ratio.group(1)) > 0, out
    for expected in ("GFLOP/s", "projections at M=", "overhead of our step", "cpu flags:", "threads"):
        assert expected in out, out
