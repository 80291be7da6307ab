"""Make a student model repeat a teacher's answer, for RL-based distillation (the reference's
`art.guided_completion`).

`get_guided_completion_params(teacher_completion, tools)` turns a teacher's reply into request options
that force the student to give the same answer: for a tool call, the tool with its parameters frozen to
the teacher's arguments (`freeze_tool_schema`) and a `tool_choice` naming it; for text, vLLM's
`guided_choice` with the teacher's text as the only choice. ART's server honours both (as vLLM does), so
the student's own logprobs for the teacher's answer come back for training.

Example:
    guided_choice, tool_choice, tools = get_guided_completion_params(teacher, base_tools=TOOLS)
    student = await client.chat.completions.create(
        model=model.get_inference_name(), messages=messages,
        **({"tools": tools, "tool_choice": tool_choice} if tools else {"extra_body": {"guided_choice": guided_choice}}),
    )
"""

from __future__ import annotations

import copy
import json
from collections.abc import Iterable
from typing import Any

from openai.types.chat.chat_completion import ChatCompletion

__all__ = ["freeze_tool_schema", "get_guided_completion_params"]


def freeze_tool_schema(tool: dict[str, Any], fixed_args: dict[str, Any]) -> dict[str, Any]:
    """A copy of an OpenAI tool whose parameters admit exactly `fixed_args` (each a JSON `const`).

    Example:
        >>> tool = {"type": "function", "function": {"name": "move", "parameters": {"type": "object"}}}
        >>> freeze_tool_schema(tool, {"square": "B2"})["function"]["parameters"]["properties"]
        {'square': {'const': 'B2'}}
    """
    if not isinstance(fixed_args, dict):
        raise ValueError(f"fixed_args must be a JSON object of arguments, got {type(fixed_args).__name__}")
    frozen = copy.deepcopy(tool)
    frozen["function"]["parameters"] = {
        "type": "object",
        "properties": {name: {"const": value} for name, value in fixed_args.items()},
        "required": list(fixed_args),
        "additionalProperties": False,
    }
    return frozen


def get_guided_completion_params(
    completion: ChatCompletion, base_tools: Iterable[dict[str, Any]] | None = None
) -> tuple[list[str] | None, dict[str, Any] | None, list[dict[str, Any]] | None]:
    """`(guided_choice, tool_choice, tools)` that make a student give the teacher's first choice again.

    A teacher's tool call gives `(None, {"type": "function", "function": {"name": ...}}, [frozen tool])`
    (its first call; the tool must be in `base_tools`); a text reply gives `([text], None, None)`.

    Example:
        >>> from openai.types.chat.chat_completion import ChatCompletion
        >>> teacher = ChatCompletion.model_validate({"id": "t", "object": "chat.completion", "created": 0,
        ...     "model": "teacher", "choices": [{"index": 0, "finish_reason": "stop",
        ...     "message": {"role": "assistant", "content": "B2"}}]})
        >>> get_guided_completion_params(teacher)
        (['B2'], None, None)
    """
    if not completion.choices:
        raise ValueError("the teacher's completion has no choices")
    message = completion.choices[0].message
    if message.tool_calls:
        call = message.tool_calls[0]
        function = getattr(call, "function", None)
        if function is None:
            raise ValueError(f"only function tool calls can be guided, got a {call.type!r} tool call")
        tools = list(base_tools) if base_tools is not None else []
        chosen = next((t for t in tools if t.get("function", {}).get("name") == function.name), None)
        if chosen is None:
            offered = [t.get("function", {}).get("name") for t in tools]
            raise ValueError(
                f"the teacher called {function.name!r}, which is not among base_tools {offered}: pass the "
                "tools the teacher was given"
            )
        try:
            arguments = json.loads(function.arguments)
        except json.JSONDecodeError as e:
            raise ValueError(f"the teacher's arguments for {function.name!r} are not JSON: {e}") from None
        tool_choice = {"type": "function", "function": {"name": function.name}}
        return None, tool_choice, [freeze_tool_schema(chosen, arguments)]
    return [message.content or ""], None, None
