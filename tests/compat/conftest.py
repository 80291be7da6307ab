"""Fixtures for the reference-compatibility tests: the model the examples run on, a local stand-in for
their hosted judge, and eager training kernels.

Everything runs through the real stack: `LocalBackend` (engine, OpenAI-compatible server on 127.0.0.1,
trainer) and the official `openai` client.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.importorskip("torch", reason="needs the `local` extra: pip install -e '.[local]'")

sys.path.insert(0, os.path.dirname(__file__))  # the examples' game modules, beside the tests
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(__file__)), "rewards"))  # scripted judge

from compat_model import make_compat_model
from scripted_judge import ScriptedJudgeServer


@pytest.fixture(scope="session")
def compat_model_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny model that answers in the examples' formats (see compat_model.py)."""
    return make_compat_model(tmp_path_factory.mktemp("compat-model") / "model")


@pytest.fixture(scope="session")
def local_judge() -> Iterator[ScriptedJudgeServer]:
    """An OpenAI-compatible judge on 127.0.0.1 standing in for the examples' hosted "openai/o4-mini"."""
    server = ScriptedJudgeServer()
    server.start()
    yield server
    server.stop()


@pytest.fixture(scope="module", autouse=True)
def _eager_training_kernels() -> Iterator[None]:
    """The examples call `LocalBackend()` as the originals do, so the trainer's element-wise kernels are
    left uncompiled through the documented override (`ART_TRAIN_COMPILE=0`, read when a backend is made):
    compiling them takes about a minute per process and gains nothing on a tiny model's short sequences."""
    old = os.environ.get("ART_TRAIN_COMPILE")
    os.environ["ART_TRAIN_COMPILE"] = "0"
    try:
        yield
    finally:
        if old is None:
            os.environ.pop("ART_TRAIN_COMPILE", None)
        else:
            os.environ["ART_TRAIN_COMPILE"] = old
