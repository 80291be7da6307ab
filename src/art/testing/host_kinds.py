"""Other kinds of host, forced on this one: the environment that makes an AVX-512 BF16 CPU compute as an AVX2
one or as an AVX-512 one without BF16 does, and the switch that hides its bf16 instructions from ART.

Hosts differ (docs/hosts.md): AVX2-only ones, AVX-512 ones without BF16, AVX-512 BF16 ones (Intel with AMX;
AMD, whose MKL takes its AVX2 code path). What can be forced from the environment:

- `avx2`: ATen's and inductor's code (so our C++ kernels too) for AVX2, oneDNN and MKL limited to AVX2, and the
  CPU's bf16 instructions hidden from ART (the engine picks float32, the kernels round bf16 in software);
- `amd-avx512-bf16`: MKL's AVX2 code path (what MKL runs on AMD CPUs) beside oneDNN's AVX-512 BF16 kernels;
- `avx512-no-bf16`: oneDNN limited to AVX-512 without BF16, and the bf16 instructions hidden from ART.

The environment must be set before torch is imported (a child process: `profile_env`); the hiding happens in
that child (`hide_cpu_bf16_if_asked`, called by tests/conftest.py and `benchmarks/as_host.py`). Each profile
keeps its own inductor cache: torch 2.13's on-disk cache does not tell code built for one vector ISA from code
built for another, and loading the other's corrupts the heap or computes NaN.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Mapping
from pathlib import Path

from art.common.env import ART_TEST_HIDE_CPU_BF16 as HIDE_CPU_BF16
from art.common.env import read as read_env

PROFILES: dict[str, dict[str, str]] = {
    "avx2": {
        "ATEN_CPU_CAPABILITY": "avx2",
        "ONEDNN_MAX_CPU_ISA": "AVX2",
        "MKL_ENABLE_INSTRUCTIONS": "AVX2",
        HIDE_CPU_BF16: "1",
    },
    "amd-avx512-bf16": {"MKL_ENABLE_INSTRUCTIONS": "AVX2", "ONEDNN_MAX_CPU_ISA": "AVX512_CORE_BF16"},
    "avx512-no-bf16": {
        "ONEDNN_MAX_CPU_ISA": "AVX512_CORE",
        "MKL_ENABLE_INSTRUCTIONS": "AVX512",
        HIDE_CPU_BF16: "1",
    },
}


def profile_env(profile: str, environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """`environ` (default: this process's) with `profile`'s kernels forced and an inductor cache of their own.

    Example:
        subprocess.run([sys.executable, "-c", "import torch"], env=profile_env("avx2"))
    """
    if profile not in PROFILES:
        raise ValueError(f"unknown host profile {profile!r}: use one of {', '.join(PROFILES)}")
    base = os.environ if environ is None else environ
    env = {k: v for k, v in base.items() if not k.startswith(("PYTEST_", "TORCHINDUCTOR_CACHE_DIR"))}
    cache = Path(tempfile.gettempdir()) / f"art-inductor-{profile}-{os.getuid()}"
    return env | PROFILES[profile] | {"TORCHINDUCTOR_CACHE_DIR": str(cache)}


def hide_cpu_bf16_if_asked() -> bool:
    """Where `HIDE_CPU_BF16` is "1": make ART see a CPU without bf16 instructions, as on an AVX2 host or an
    AVX-512 one without BF16 ("auto" picks float32, the C++ kernels round bf16 in software). True if hidden;
    a light install without torch has nothing to hide."""
    if read_env(HIDE_CPU_BF16) != "1":
        return False
    try:
        from art.base_model import loader
        from art.kernels import cpp_kernels
    except ImportError:
        return False
    loader.cpu_supports_bf16 = lambda: False
    cpp_kernels._cpu_has_native_bf16 = lambda: False  # type: ignore[assignment]
    return True
