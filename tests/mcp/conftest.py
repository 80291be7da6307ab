"""Fixtures for the MCP-RL and AutoRL tests: the shipped MCP server as a real subprocess, and a scripted
OpenAI-compatible LLM (agent, generator, judge) over HTTP on 127.0.0.1."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.importorskip("mcp", reason="needs the `mcp` extra: pip install -e '.[mcp]'")

sys.path.insert(0, os.path.dirname(__file__))

from scripted_llm import ScriptedLLM

from art.mcp import McpServer


@pytest.fixture(scope="session")
def llm_server() -> Iterator[ScriptedLLM]:
    server = ScriptedLLM()
    server.start()
    yield server
    server.stop()


@pytest.fixture
def llm(llm_server: ScriptedLLM) -> ScriptedLLM:
    """The scripted LLM server with no handlers and no recorded requests."""
    llm_server.reset()
    return llm_server


@pytest.fixture(autouse=True)
def _judge_cache_in_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ART_JUDGE_CACHE_DIR", str(tmp_path / "judge-cache"))


def mailbox_server(*extra: str, timeout: float = 30.0) -> McpServer:
    """The shipped mailbox MCP server, started with this Python over stdio."""
    return McpServer.stdio(sys.executable, "-m", "art.examples.mcp_rl.server", *extra, timeout=timeout)


@pytest.fixture
def mailbox() -> McpServer:
    return mailbox_server()


@pytest.fixture
def faulty_mailbox() -> McpServer:
    """The mailbox with its test-fault tools (crash_server, slow_tool) and a 3-second request timeout."""
    return mailbox_server("--fault-tools", timeout=3.0)
