"""The ISA-sensitive tests again with AVX2 kernels, on a host whose own are AVX-512.

Hosts differ: some run PyTorch's and our kernels in AVX-512, some only in AVX2, and a test that passes only on
the kind at hand is not done (an AVX-512-only tolerance in the two-rank parity test would have failed on every
AVX2 host). On an AVX-512 host this runs the kernels, the trainer's fast paths, served = trained in both dtypes
and the two-rank parity in a child pytest with `ATEN_CPU_CAPABILITY=avx2` (ATen's and inductor's code, so
ours too) and `ONEDNN_MAX_CPU_ISA=AVX2` (oneDNN's matmuls). On an AVX2 host the whole suite already does.

The child keeps its own inductor cache: torch 2.13's on-disk cache does not tell code built for one vector ISA
from code built for another, and loading the other's corrupts the heap or computes NaN.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

torch = pytest.importorskip("torch", reason="needs the `local` extra: pip install -e '.[local]'")

ROOT = Path(__file__).resolve().parents[2]
ISA_SENSITIVE = [
    "tests/kernels/test_cpp_kernels.py",
    "tests/engines/torch/test_decode_attention.py",
    "tests/training/test_fast_paths.py::test_compiled_kernels_equal_eager",
    "tests/training/test_fast_paths.py::test_fast_decoder_equals_peft_forward_float32",
    "tests/training/test_fast_paths.py::test_fast_decoder_bf16_is_as_close_to_float32_as_peft",
    "tests/training/test_ranks.py::test_two_gloo_ranks_train_the_adapter_one_process_trains",
    "tests/backends/test_sft_local.py::test_sft_teaches_the_served_model_its_answers",
    "tests/backends/test_local.py::test_a_tiny_model_learns_through_the_real_server_and_trainer",
    "tests/training/test_fast_paths.py::test_the_kernels_that_train_do_not_depend_on_what_ran_before",
]


def avx2_env() -> dict[str, str]:
    """This process's environment with AVX2 kernels forced and an inductor cache of their own."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "TORCHINDUCTOR_CACHE_DIR"))}
    cache = Path(tempfile.gettempdir()) / f"art-inductor-avx2-{os.getuid()}"
    return env | {
        "ATEN_CPU_CAPABILITY": "avx2",
        "ONEDNN_MAX_CPU_ISA": "AVX2",
        "TORCHINDUCTOR_CACHE_DIR": str(cache),
    }


@pytest.mark.slow
def test_the_isa_sensitive_tests_pass_with_avx2_kernels() -> None:
    capability = torch.backends.cpu.get_cpu_capability()
    if capability != "AVX512":
        pytest.skip(f"this host's kernels are {capability} already: the whole suite runs them")
    probe = subprocess.run(
        [sys.executable, "-c", "import torch; print(torch.backends.cpu.get_cpu_capability())"],
        env=avx2_env(),
        capture_output=True,
        text=True,
        check=True,
    )
    assert probe.stdout.strip() == "AVX2"  # the child really runs AVX2 kernels
    child = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *ISA_SENSITIVE],
        cwd=ROOT,
        env=avx2_env(),
        capture_output=True,
        text=True,
        timeout=540,
    )
    assert child.returncode == 0, child.stdout[-6000:] + child.stderr[-2000:]
    assert " passed" in child.stdout.strip().splitlines()[-1]
