"""Fixtures for the MCP-RL and AutoRL tests: the shipped MCP server as a real subprocess, and a scripted
OpenAI-compatible LLM (agent, generator, judge) over HTTP on 127.0.0.1."""

from __future__ import annotations

import os
import sys

import pytest

pytest.importorskip("mcp", reason="needs the `mcp` extra: pip install -e '.[mcp]'")

sys.path.insert(0, os.path.dirname(__file__))

from scripted_llm import _judge_cache_in_tmp, llm, llm_server  # noqa: F401 - fixtures

from art.mcp import McpServer


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
