"""AutoRL tests share the scripted LLM server of the MCP tests (generator and judge over HTTP)."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(__file__)), "mcp"))

from scripted_llm import ScriptedLLM


@pytest.fixture(scope="session")
def llm_server() -> Iterator[ScriptedLLM]:
    server = ScriptedLLM()
    server.start()
    yield server
    server.stop()


@pytest.fixture
def llm(llm_server: ScriptedLLM) -> ScriptedLLM:
    llm_server.reset()
    return llm_server


@pytest.fixture(autouse=True)
def _judge_cache_in_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ART_JUDGE_CACHE_DIR", str(tmp_path / "judge-cache"))
