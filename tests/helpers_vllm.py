"""Which Python runs the real vLLM in tests, and the tiny model it can serve (its CPU attention wants heads of 64).

Found in order: ART_TEST_VLLM_PYTHON; the venv `python -m art.engines.vllm.install` makes (the README's test
command makes it first, so CI runs these tests for real); ~/vllm-venv (docs/gpu.md's older recipe); this Python
if it has vLLM. None: the tests that need it skip, saying how to make it.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path

SKIP_REASON = "no vLLM: run `python -m art.engines.vllm.install` (or set ART_TEST_VLLM_PYTHON)"


def find_vllm_python() -> str | None:
    from art.engines.vllm.install import default_venv, venv_python, working_version

    named = os.environ.get("ART_TEST_VLLM_PYTHON")
    if named:
        return named
    for venv in (default_venv(), Path.home() / "vllm-venv"):
        if venv_python(venv).is_file() and working_version(venv) is not None:
            return str(venv_python(venv))
    return sys.executable if importlib.util.find_spec("vllm") else None


def make_vllm_tiny_model(path: Path) -> Path:
    """A tiny random Llama with heads of 64 and a trained model's embedding spread (adapters can move it)."""
    from art.testing.tiny_model import make_tiny_model

    return make_tiny_model(path, hidden_size=256, num_heads=4, num_kv_heads=2, embedding_std=0.1)
