"""The numerics-sensitive tests again with the kernels of the other kinds of host, forced on this one.

Hosts differ: AVX2-only ones, AVX-512 ones without BF16, AVX-512 BF16 ones (Intel with AMX; AMD, whose MKL takes
its AVX2 code path). A test that passes only on the kind at hand is not done: an AVX-512-only tolerance in the
two-rank parity test failed on every AVX2 host, and `noise_floor == 0.0` held everywhere but on an AMD AVX-512
BF16 host. Each profile (`art.testing.host_kinds`: what can be forced from the environment) runs its tests in a
child pytest.

Each profile runs what it changes (`TESTS`), sized to keep the suite's time:

- `avx2`: ATen's and inductor's code (so the C++ kernels too) for AVX2, oneDNN and MKL limited to AVX2;
- `amd-avx512-bf16`: MKL's AVX2 code path (what MKL runs on AMD CPUs) beside oneDNN's AVX-512 BF16 kernels
  without AMX: this reproduced the AMD host's two failures (canary floor 1.4e-6, FSDP2 parity) on an Intel one;
- `avx512-no-bf16`: oneDNN limited to AVX-512 without BF16, and the CPU's bf16 instructions hidden from ART
  (`ART_TEST_HIDE_CPU_BF16`, read by tests/conftest.py): the engine picks float32 and the kernels round bf16 in
  software, as on a host without them.

A profile that needs instructions this host lacks, or that is this host's own, is skipped saying so. The child
keeps its own inductor cache: torch 2.13's on-disk cache does not tell code built for one vector ISA from code
built for another, and loading the other's corrupts the heap or computes NaN.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from art.testing.host_kinds import PROFILES, profile_env

torch = pytest.importorskip("torch", reason="needs the `local` extra: pip install -e '.[local]'")

ROOT = Path(__file__).resolve().parents[2]
KERNELS = [  # ATen's, inductor's and our C++ kernels, and oneDNN's packed weights
    "tests/kernels/test_cpp_kernels.py",
    "tests/engines/torch/test_decode_attention.py",
    "tests/engines/torch/test_forward.py::test_packed_bf16_weights_give_the_plain_matmul_results",
    "tests/training/test_causal_attention.py",
    "tests/training/test_fast_paths.py::test_compiled_kernels_equal_eager",
    "tests/training/test_fast_paths.py::test_fast_decoder_equals_peft_forward_float32",
    "tests/training/test_fast_paths.py::test_fast_decoder_bf16_is_as_close_to_float32_as_peft",
    "tests/training/test_fast_paths.py::test_the_kernels_that_train_do_not_depend_on_what_ran_before",
]
PARITY = [  # two implementations of one function compared: where another host's sums change the figures
    "tests/training/test_ranks.py::test_two_gloo_ranks_train_the_adapter_one_process_trains",
    "tests/service/test_canary_engines.py::test_the_canary_passes_the_right_adapter_and_fails_each_wrong_one[float32]",
    # the trust region's KL from the training forward's rows vs an eval-mode scoring (1.2e-6 apart with AVX2's)
    "tests/training/test_trust_region.py",
]
LEARNING = [  # a recipe that must still learn with another host's rounding
    "tests/backends/test_sft_local.py::test_sft_teaches_the_served_model_its_answers",
    "tests/backends/test_local.py::test_a_tiny_model_learns_through_the_real_server_and_trainer",
]
BF16 = [  # bf16 rounded in software (no AVX-512 BF16): the canary and the engine's bf16 LoRA arithmetic
    "tests/service/test_canary_engines.py::test_the_canary_passes_the_right_adapter_and_fails_each_wrong_one[bfloat16]",
    "tests/backends/test_bf16_canary.py",
]

TESTS: dict[str, list[str]] = {
    # everything differs on an AVX2 host
    "avx2": KERNELS + PARITY + LEARNING,
    # only MKL's float32 sums differ from an Intel AVX-512 BF16 host's (bf16 matmuls are oneDNN's either way)
    "amd-avx512-bf16": PARITY + BF16[1:],
    # oneDNN without BF16, and bf16 rounded in software by our kernels
    "avx512-no-bf16": KERNELS[:5] + BF16,
}


def _cpu_flags() -> set[str]:
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return set()
    line = next((line for line in text.splitlines() if line.startswith("flags")), "")
    return set(line.split(":", 1)[-1].split())


def why_not(profile: str, flags: set[str], capability: str) -> str | None:
    """Why `profile` cannot (or need not) be forced on a host with these CPU flags and torch capability."""
    if "avx512f" not in flags or capability not in ("AVX512", "AVX512_BF16", "AMX"):
        return f"this host's kernels are {capability}: it is an AVX2 host, the whole suite runs its kernels"
    if profile == "avx512-no-bf16" and "avx512_bf16" not in flags:
        return "this host has no AVX-512 BF16: the whole suite runs as this profile"
    return None


def test_a_host_without_avx512_skips_every_profile() -> None:
    assert why_not("avx2", {"avx2"}, "AVX2") is not None
    assert why_not("avx512-no-bf16", {"avx512f"}, "AVX512") is not None
    assert why_not("amd-avx512-bf16", {"avx512f"}, "AVX512") is None
    assert why_not("avx512-no-bf16", {"avx512f", "avx512_bf16"}, "AVX512") is None


@pytest.mark.slow
@pytest.mark.timeout(1500)
@pytest.mark.parametrize("profile", list(PROFILES))
def test_the_numerics_tests_pass_with_another_hosts_kernels(profile: str) -> None:
    reason = why_not(profile, _cpu_flags(), torch.backends.cpu.get_cpu_capability())
    if reason is not None:
        pytest.skip(reason)
    env = profile_env(profile)
    probe = subprocess.run(
        [sys.executable, "-c", "import torch; print(torch.backends.cpu.get_cpu_capability())"],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    expected = "AVX2" if profile == "avx2" else torch.backends.cpu.get_cpu_capability()
    assert probe.stdout.strip() == expected, probe.stdout  # the child really runs that profile's kernels
    child = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *TESTS[profile]],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=1400,
    )
    assert child.returncode == 0, child.stdout[-6000:] + child.stderr[-2000:]
    assert " passed" in child.stdout.strip().splitlines()[-1]
