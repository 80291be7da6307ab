"""`art.testing.host_kinds`: the other hosts' environments, and `benchmarks/as_host.py` that runs `art` under
one (a child process whose torch computes with that host's kernels and sees no bf16 instructions)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from art.testing.host_kinds import HIDE_CPU_BF16, PROFILES, profile_env

ROOT = Path(__file__).resolve().parents[2]


def test_a_profile_env_forces_its_kernels_in_a_cache_of_its_own() -> None:
    env = profile_env(
        "avx2", {"PATH": "/bin", "TORCHINDUCTOR_CACHE_DIR": "/shared", "PYTEST_XDIST_WORKER": "gw0"}
    )
    assert env["ATEN_CPU_CAPABILITY"] == "avx2" and env["ONEDNN_MAX_CPU_ISA"] == "AVX2"
    assert env[HIDE_CPU_BF16] == "1" and env["PATH"] == "/bin" and "PYTEST_XDIST_WORKER" not in env
    assert env["TORCHINDUCTOR_CACHE_DIR"] != "/shared" and "avx2" in env["TORCHINDUCTOR_CACHE_DIR"]
    with pytest.raises(ValueError, match=r"unknown host profile 'arm'.*avx2"):
        profile_env("arm")


def test_a_child_asked_to_hide_bf16_picks_float32_as_such_a_host_does() -> None:
    pytest.importorskip("torch", reason="needs the `local` extra")
    code = (
        "from art.testing.host_kinds import hide_cpu_bf16_if_asked as h; print(h()); "
        "from art.base_model import loader; print(loader.choose_dtype('auto', 'cpu'))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        env=profile_env("avx512-no-bf16"),
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    assert out == ["True", "torch.float32"]


def test_as_host_refuses_what_it_cannot_run_with_its_usage() -> None:
    for argv in ([], ["arm", "art", "demo"], ["avx2", "python", "x.py"]):
        run = subprocess.run(
            [sys.executable, str(ROOT / "benchmarks" / "as_host.py"), *argv], capture_output=True, text=True
        )
        assert run.returncode == 2 and all(p in run.stderr for p in PROFILES), run.stderr
