"""Every `ART_*` environment variable in one table: its name, what it sets, and the one place that reads it.

Code reads these variables only through `read` (a name missing from `ENV_VARS` is a KeyError, so a new
variable starts here), and only at the top: when a backend is made (`RuntimeOptions.with_env_overrides`),
when a cache folder is first named, when the `art` command starts (click reads the `envvar=` options).
Nothing below those reads the environment, and no library code writes it (tests/common/test_env_table.py).

Example:
    >>> read("ART_DEVICE", {"ART_DEVICE": " cpu "})
    'cpu'
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class EnvVar:
    """One variable: its name, what it sets, who reads it (once) and, for a runtime option, the field of
    `art.RuntimeOptions` it overrides."""

    name: str
    sets: str
    read_by: str
    runtime_option: str | None = None


_WITH_OVERRIDES = "RuntimeOptions.with_env_overrides, when a backend is made"
ART_API_KEY = "ART_API_KEY"
ART_TEST_HIDE_CPU_BF16 = "ART_TEST_HIDE_CPU_BF16"
SERVE_DEFAULT_PORT = 7999
"""The port `art serve` listens on by default (and `RemoteBackend`, `art launch` assume)."""

ENV_VARS: dict[str, EnvVar] = {
    v.name: v
    for v in (
        EnvVar("ART_DEVICE", "where the service runs", _WITH_OVERRIDES, "device"),
        EnvVar("ART_ENGINE", "the inference engine", _WITH_OVERRIDES, "engine"),
        EnvVar(
            "ART_ENGINE_COMPILE", "the torch engine's compiled kernels", _WITH_OVERRIDES, "engine_compile"
        ),
        EnvVar("ART_ENGINE_FOLD_LORA", "LoRA folded into the engine's matmuls", _WITH_OVERRIDES, "fold_lora"),
        EnvVar("ART_ENGINE_SHARE_PREFIXES", "the engine's prefix cache", _WITH_OVERRIDES, "share_prefixes"),
        EnvVar(
            "ART_NATIVE_BF16", "AVX-512 BF16 conversions in the C++ kernels", _WITH_OVERRIDES, "native_bf16"
        ),
        EnvVar("ART_TRAIN_COMPILE", "the trainer's compiled decoder", _WITH_OVERRIDES, "train_compile"),
        EnvVar(
            "ART_TRAIN_CPP_ATTENTION",
            "the trainer's C++ causal attention",
            _WITH_OVERRIDES,
            "train_cpp_attention",
        ),
        EnvVar(
            "ART_TRAIN_SHARED_PREFIX",
            "the trainer's shared prompt start, computed once",
            _WITH_OVERRIDES,
            "train_shared_prefix",
        ),
        EnvVar("ART_RELEASE_MEMORY", "returning freed memory to the OS", _WITH_OVERRIDES, "release_memory"),
        EnvVar("ART_VLLM_PYTHON", "the interpreter vLLM runs in", _WITH_OVERRIDES, "vllm_python"),
        EnvVar(
            "ART_CACHE_DIR",
            "ART's cache folder (the converted default model, the vLLM venv, the judge's answers)",
            "common.env.cache_dir, when a cache folder is named",
        ),
        EnvVar("ART_JUDGE_CACHE_DIR", "the judge's answer cache alone", "rewards.cache.default_cache_dir"),
        EnvVar("ART_DEBUG", "a traceback for an unexpected error of the `art` command", "cli.main"),
        EnvVar(ART_API_KEY, "RemoteBackend's key for `art serve`", "RemoteBackend(), `art demo --remote`"),
        EnvVar(
            ART_TEST_HIDE_CPU_BF16,
            '"1": ART sees a CPU without bf16 instructions (another kind of host forced, in a test or benchmark)',
            "testing.host_kinds.hide_cpu_bf16_if_asked, in tests/conftest.py and benchmarks/as_host.py",
        ),
        EnvVar("ART_BASE_MODEL_ROOTS", "`art serve --base-model-root`", "click, when `art serve` starts"),
        EnvVar("ART_GENERATOR", "`art autorl --generator`", "click, when `art autorl` starts"),
        EnvVar(
            "ART_GENERATOR_BASE_URL", "`art autorl --generator-base-url`", "click, when `art autorl` starts"
        ),
        EnvVar(
            "ART_GENERATOR_API_KEY", "`art autorl --generator-api-key`", "click, when `art autorl` starts"
        ),
        EnvVar("ART_JUDGE", "`art autorl --judge`", "click, when `art autorl` starts"),
        EnvVar("ART_JUDGE_BASE_URL", "`art autorl --judge-base-url`", "click, when `art autorl` starts"),
        EnvVar("ART_JUDGE_API_KEY", "`art autorl --judge-api-key`", "click, when `art autorl` starts"),
        EnvVar(
            "ART_SERVE_PORT",
            "the port of `art launch`'s cloud task",
            "the task's shell, on the cloud machine",
        ),
        EnvVar(
            "ART_SERVE_ENGINE",
            "the engine of `art launch`'s cloud task",
            "the task's shell, on the cloud machine",
        ),
        *(
            EnvVar(name, f"{what} of `art launch --nodes`' cluster task", "the task's shell, on each node")
            for name, what in (
                ("ART_SERVE_PATH", "the record (the bucket's mount)"),
                ("ART_RAY_PORT", "the Ray head's port"),
                ("ART_NUM_NODES", "the nodes the head waits for"),
                ("ART_INFERENCE_REPLICAS", "`art serve --inference-replicas`"),
                ("ART_TRAIN_RANKS", "`art serve --train-ranks`"),
                ("ART_TRAIN_SHARDING", "`art serve --train-sharding`"),
            )
        ),
    )
}
"""The table: every `ART_*` variable, by name."""


def read(name: str, environ: Mapping[str, str] | None = None) -> str | None:
    """The value of `name` (stripped; None when unset or blank), from `environ` or the process environment.

    A name missing from `ENV_VARS` is a KeyError: add it to the table first."""
    if name not in ENV_VARS:
        raise KeyError(
            f"{name} is not in art.common.env.ENV_VARS: add it there (name, what it sets, who reads it)"
        )
    value = (os.environ if environ is None else environ).get(name, "").strip()
    return value or None


def cache_dir() -> Path:
    """ART's cache folder, where every cache of ours lives unless told otherwise: `$ART_CACHE_DIR`, else
    `$XDG_CACHE_HOME/art`, else `~/.cache/art`.

    Example:
        >>> cache_dir().name
        'art'
    """
    explicit = read("ART_CACHE_DIR")
    if explicit:
        return Path(explicit).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME")
    return (Path(xdg).expanduser() if xdg else Path.home() / ".cache") / "art"
