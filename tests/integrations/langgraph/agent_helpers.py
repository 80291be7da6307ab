"""The calculator agent of the LangGraph tests: two tools, a ReAct agent, and a message-by-message check."""

from __future__ import annotations

import contextvars
import json
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage
from langchain_core.tools import tool
from langgraph.prebuilt import create_react_agent
from openai.types.chat.chat_completion import Choice

from art.langgraph import init_chat_model

SYSTEM = "You are a calculator. Use the tools."
ADD_CALL = '<tool_call>\n{"name": "add", "arguments": {"a": 2, "b": 3}}\n</tool_call>'
MULTIPLY_CALL = '<tool_call>\n{"name": "multiply", "arguments": {"a": 5, "b": 4}}\n</tool_call>'
FAIL_MULTIPLY: contextvars.ContextVar[bool] = contextvars.ContextVar("fail_multiply", default=False)


def calculator_script(prompt: str) -> str:
    if "You are a critic." in prompt:
        return "Looks right."
    done = prompt.count("<tool_response>")
    return [ADD_CALL, MULTIPLY_CALL][done] if done < 2 else "The answer is 20."


@tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@tool
def multiply(a: int, b: int) -> int:
    """Multiply two integers."""
    if a == 5 and b == 4 and FAIL_MULTIPLY.get():
        raise RuntimeError("multiply exploded")
    return a * b


async def run_agent(question: str, *, fail: bool = False, **chat_options: Any) -> list[BaseMessage]:
    """Run a fresh ReAct agent (init_chat_model inside a wrapped rollout) and return its final messages."""
    FAIL_MULTIPLY.set(fail)
    agent = create_react_agent(init_chat_model(**chat_options), [add, multiply])
    state = await agent.ainvoke({"messages": [SystemMessage(SYSTEM), HumanMessage(question)]})
    return list(state["messages"])


def assert_same_conversation(seen: list[BaseMessage], items: list[Any]) -> None:
    """Each message the agent saw equals the captured one (Choices for the model's turns)."""
    assert len(items) == len(seen)
    for i, (message, item) in enumerate(zip(seen, items, strict=True)):
        where = f"message {i} ({type(message).__name__})"
        if isinstance(message, AIMessage):
            assert isinstance(item, Choice), where
            assert (item.message.content or "") == message.content, where
            calls = [
                (c.function.name, json.loads(c.function.arguments), c.id)
                for c in item.message.tool_calls or []
            ]
            assert calls == [(c["name"], c["args"], c["id"]) for c in message.tool_calls], where
            assert len(item.token_ids) == len(item.logprobs.content) > 0, where  # type: ignore[attr-defined, union-attr]
            continue
        assert isinstance(item, dict), where
        role = {SystemMessage: "system", HumanMessage: "user", ToolMessage: "tool"}[type(message)]
        assert item["role"] == role and item["content"] == message.content, where
        if isinstance(message, ToolMessage):
            assert item["tool_call_id"] == message.tool_call_id, where
