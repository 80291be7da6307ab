"""LangGraph integration: train an agent built with LangGraph without changing it (needs `art[langgraph]`).

`init_chat_model()` gives the agent a LangChain chat model served by the model being trained;
`wrap_rollout(model, fn)` turns every LLM call that the agent makes inside `fn` into one `art.Trajectory`.
See docs/integrations.md.
"""

from __future__ import annotations

import importlib.util

_MISSING = [name for name in ("langchain_openai", "langchain_core") if importlib.util.find_spec(name) is None]
if _MISSING:
    raise ImportError(
        f"art.langgraph needs {', '.join(_MISSING)}: pip install 'agent-reinforcement-trainer[langgraph]'"
    )

from art.integrations.langgraph.call_log import CallLog, LoggedCall, read_call_log  # noqa: E402
from art.integrations.langgraph.llm_wrapper import init_chat_model, load_trajectory, wrap_rollout  # noqa: E402

__all__ = ["CallLog", "LoggedCall", "init_chat_model", "load_trajectory", "read_call_log", "wrap_rollout"]
