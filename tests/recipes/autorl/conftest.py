"""AutoRL tests share the scripted LLM server of the MCP tests (generator and judge over HTTP)."""

from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(__file__)), "mcp_rl"))

from scripted_llm import _judge_cache_in_tmp, llm, llm_server  # noqa: F401 - fixtures
