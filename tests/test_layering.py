"""The arrows of DESIGN.md section 2 hold: the client imports no torch, training imports no engine, the
shared rooms (chat, kernels, base_model) import nothing above them. Checked in fresh interpreters, so what
other tests imported cannot hide an import."""

from __future__ import annotations

import functools
import json
import subprocess
import sys

import pytest


@functools.cache
def _modules_after(code: str) -> frozenset[str]:
    script = f"{code}\nimport sys, json\nprint(json.dumps(sorted(sys.modules)))"
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    return frozenset(json.loads(done.stdout.strip().splitlines()[-1]))


def _ours(modules: frozenset[str], package: str) -> list[str]:
    return sorted(m for m in modules if m == package or m.startswith(package + "."))


def _beyond_art(code: str) -> frozenset[str]:
    """Modules `code` imports beyond what `import art` itself loads (its light public face)."""
    return _modules_after(code) - _modules_after("import art")


def test_import_art_stays_light() -> None:
    modules = _modules_after("import art; art.Trajectory; art.TrainableModel; art.RuntimeOptions")
    heavy = [m for m in ("torch", "transformers", "fastapi", "uvicorn", "peft") if m in modules]
    assert heavy == [], f"`import art` loaded {heavy}"
    assert _ours(modules, "art.engines") == [] and _ours(modules, "art.training") == []


def test_the_remote_client_stays_light() -> None:
    """`RemoteBackend` (both import paths) and the wire shapes it shares with `art serve`: no torch, no web
    framework, nothing of the service."""
    modules = _modules_after(
        "import art; art.RemoteBackend; from art.remote import RemoteBackend; import art.backends.remote_protocol"
    )
    assert "art.backends.remote" in modules and "httpx" in modules
    heavy = [m for m in ("torch", "transformers", "fastapi", "uvicorn", "peft", "starlette") if m in modules]
    assert heavy == [], f"the remote client loaded {heavy}"
    for below in (
        "art.service",
        "art.engines",
        "art.training",
        "art.serve.api",
        "art.serve.hub",
        "art.serve.jobs",
    ):
        assert _ours(modules, below) == [], _ours(modules, below)


def test_training_imports_no_engine() -> None:
    pytest.importorskip("torch")
    modules = _beyond_art(
        "import art.training.trainer, art.training.tokenize, art.training.logprobs, art.training.fast_decoder"
    )
    assert "art.training.trainer" in modules
    assert _ours(modules, "art.engines") == [], "training imported an engine module"
    assert _ours(modules, "art.service") == [] and _ours(modules, "art.backends") == []


def test_shared_rooms_import_nothing_above_them() -> None:
    """Every module of chat, kernels and base_model, imported together (one interpreter: if none of them
    reaches above, neither does any one of them)."""
    pytest.importorskip("torch")
    import importlib
    import pkgutil

    names = [
        f"{package}.{m.name}"
        for package in ("art.chat", "art.kernels", "art.base_model")
        for m in pkgutil.iter_modules(importlib.import_module(package).__path__)
    ]
    assert len(names) >= 9, names
    modules = _beyond_art("; ".join(f"import {n}" for n in names))
    for above in ("art.engines", "art.training", "art.service", "art.backends"):
        assert _ours(modules, above) == [], f"the shared rooms imported {_ours(modules, above)}"


def test_the_service_depends_on_the_engine_protocol_not_the_torch_engine() -> None:
    pytest.importorskip("torch")
    modules = _modules_after("import art.service.service, art.server.http, art.server.chat_completions")
    assert "art.service.service" in modules
    assert _ours(modules, "art.engines.torch") == [], _ours(modules, "art.engines.torch")
