"""The canary on the real vLLM (its CPU build here), in float32 and bf16: registration measures the noise floor
(vLLM's kernels vs our trainer on the base model), two SFT steps train with the default tolerance, and then
the right adapter passes while a zeroed, a stale and an x2-scaled one each fail, by a wide margin."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from helpers_scripts import load_script
from helpers_vllm import SKIP_REASON, find_vllm_python, make_vllm_tiny_model

import art

VLLM_PYTHON = find_vllm_python()
pytestmark = [pytest.mark.skipif(VLLM_PYTHON is None, reason=SKIP_REASON), pytest.mark.timeout(1800)]


@pytest.mark.slow
@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_vllm_serves_what_was_trained_and_the_canary_catches_each_wrong_adapter(
    dtype: str, tmp_path: Path
) -> None:
    pytest.importorskip("torch")
    bench = load_script("benchmarks/bench_canary.py")
    options = art.RuntimeOptions(
        engine="vllm",
        device="cpu",
        dtype=dtype,
        vllm_python=VLLM_PYTHON,
        max_model_len=1024,
        max_num_seqs=8,
        vllm_env={"VLLM_CPU_KVCACHE_SPACE": "1"},
        train_compile=False,  # inductor's first build is slow on a loaded 2-core host; not what this tests
    )
    model = make_vllm_tiny_model(tmp_path / "tiny")
    (run,) = asyncio.run(bench.separation(options, str(model), tmp_path / "run", rounds=(2.5e-4,)))
    # Two implementations: float32 agrees to ~1e-6, bf16 to a few hundredths of a nat per token.
    assert run.noise_floor < (1e-4 if dtype == "float32" else 0.05), run
    assert run.adapter_effect > 4 * run.noise_floor, run  # a step the probe resolves
    verdicts = {row.variant: row.passed for row in run.rows}
    assert verdicts == {"correct": True, "zeroed": False, "stale": False, "x2": False}, run.rows
    correct = run.row("correct")
    assert correct.effect_error is not None and abs(correct.effect_error) < 0.25, correct
    assert correct.step_error is not None and abs(correct.step_error) < 0.25, correct
    assert run.row("zeroed").effect_error is not None and run.row("zeroed").effect_error < -0.7
    assert run.row("stale").step_error is not None and run.row("stale").step_error < -0.7
    assert run.row("x2").effect_error is not None and run.row("x2").effect_error > 0.7
    message = run.row("zeroed").message
    assert f"(vllm, {dtype})" in message and "noise floor" in message and "looks zeroed" in message
