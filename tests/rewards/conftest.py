"""Fixtures for the rewards tests: one scripted judge server per session, a fresh script and cache per test."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, os.path.dirname(__file__))  # helper modules importable by the tests beside them

from judge_helpers import FAST_RETRY
from scripted_judge import Script, ScriptedJudgeServer

from art.rewards import Judge


@pytest.fixture(scope="session")
def judge_server() -> Iterator[ScriptedJudgeServer]:
    server = ScriptedJudgeServer()
    server.start()
    yield server
    server.script.reset()  # releases a "slow" answer still pending, so the server stops at once
    server.stop()


@pytest.fixture
def script(judge_server: ScriptedJudgeServer) -> Script:
    """The server's script, reset for this test."""
    judge_server.script.reset()
    return judge_server.script


@pytest.fixture(autouse=True)
def _cache_in_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The default judge cache of every test lives in its own temp folder (never ~/.cache)."""
    folder = tmp_path / "judge-cache"
    monkeypatch.setenv("ART_JUDGE_CACHE_DIR", str(folder))
    return folder


@pytest.fixture
def make_judge(judge_server: ScriptedJudgeServer, script: Script) -> Any:
    """make_judge("marker", **overrides) -> a Judge pointed at the scripted server."""

    def make(model: str = "marker", **overrides: Any) -> Judge:
        fields: dict[str, Any] = {
            "model": model,
            "base_url": judge_server.base_url,
            "api_key": "test-key",
            "timeout": 5.0,
            "retry": FAST_RETRY,
        }
        fields.update(overrides)
        return Judge(**fields)

    return make
