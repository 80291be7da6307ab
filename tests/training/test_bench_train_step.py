"""The training-step benchmark's quick mode runs end to end (so the script never rots). Marked `bench`
(excluded from the default run for their CPU time; `python -m pytest -m bench`)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("torch", reason="needs the `local` extra")

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "bench_train_step.py"


@pytest.mark.bench  # 26 s of CPU: see tests/helpers_bench.py
def test_bench_train_step_quick() -> None:
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    result = subprocess.run(
        [sys.executable, str(SCRIPT), "--quick", "--dtype", "float32"],
        capture_output=True,
        text=True,
        timeout=600,
        env=env,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    for expected in ("forward_s", "backward_s", "optimizer_s", "tokenize_s", "peak RSS", "tokens/s"):
        assert expected in result.stdout, result.stdout


@pytest.mark.bench  # 27 s of CPU
def test_bench_train_step_alternates_a_switch_and_reports_both_medians() -> None:
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    result = subprocess.run(
        [
            *(sys.executable, str(SCRIPT), "--quick", "--dtype", "float32", "--steps", "4"),
            *("--alternate", "ART_TRAIN_CPP_ATTENTION"),
        ],
        capture_output=True,
        text=True,
        timeout=900,
        env=env,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    settings = [
        line.rsplit("=", 1)[1].rstrip("]") for line in result.stdout.splitlines() if "[ART_TRAIN" in line
    ]
    assert settings == ["1", "0", "0", "1"], result.stdout
    assert "ART_TRAIN_CPP_ATTENTION: forward+backward median" in result.stdout and "0 / 1 = " in result.stdout
