"""Chat messages and tools as a request sends them: checked strictly, normalised for the chat template.

`normalize_message` returns {"role", "content" (a string or None: text parts are joined), ...} with
assistant `tool_calls` (arguments as JSON strings) and a tool message's `tool_call_id`; `check_tool` checks
one entry of `tools`. Anything malformed raises OpenAIError(400) naming the field, e.g.
`messages[2].tool_call_id` for a tool message without one. A key a role does not have is refused when it
carries a value (`{"reasoning_content": "..."}`), and accepted when empty (`None`, "", [], {}), since
clients echo back the empty fields of messages they received (`"refusal": null`, `"audio": null`).
`name` is accepted on every role; whether it shows is up to the chat template (ours does not render it).
"""

from __future__ import annotations

import json
import re
from typing import Any

from art.openai_server.errors import OpenAIError, bad_request

ROLES = ("system", "developer", "user", "assistant", "tool")
_FUNCTION_NAME = re.compile(r"^[A-Za-z0-9_.:-]{1,64}$")
_KEYS = {
    "system": {"role", "content", "name"},
    "developer": {"role", "content", "name"},
    "user": {"role", "content", "name"},
    "assistant": {"role", "content", "name", "tool_calls"},
    "tool": {"role", "content", "tool_call_id", "name"},
}


def _error(message: str, param: str, code: str | None = None) -> OpenAIError:
    return bad_request(message, param=param, code=code)


def _content_text(content: Any, where: str) -> str | None:
    """Message content as a string: strings pass, None stays None, text parts are joined."""
    if content is None or isinstance(content, str):
        return content
    if isinstance(content, list):
        texts = []
        for j, part in enumerate(content):
            if (
                not isinstance(part, dict)
                or part.get("type") != "text"
                or not isinstance(part.get("text"), str)
            ):
                raise _error(
                    f"{where}.content[{j}]: only text parts ({{'type': 'text', 'text': ...}}) are supported.",
                    f"{where}.content",
                )
            if set(part) - {"type", "text"}:
                raise _error(
                    f"Unrecognized request argument supplied: {where}.content[{j}].{sorted(set(part) - {'type', 'text'})[0]}",
                    f"{where}.content",
                )
            texts.append(part["text"])
        return "".join(texts)
    raise _error(
        f"{where}.content must be a string, null or a list of text parts.", f"{where}.content", "invalid_type"
    )


def _empty(value: Any) -> bool:
    return value is None or value in ("", [], {})


def normalize_message(message: Any, index: int) -> dict[str, Any]:
    """A message checked and normalised for the chat template (see the module docstring)."""
    where = f"messages[{index}]"
    if not isinstance(message, dict):
        raise _error(f"Invalid type for '{where}': expected an object.", where, "invalid_type")
    role = message.get("role")
    if role not in ROLES:
        raise _error(
            f"Invalid value for '{where}.role': {role!r}. Supported roles: {', '.join(ROLES)}.",
            f"{where}.role",
        )
    for key, value in message.items():
        if key not in _KEYS[role] and not _empty(value):
            raise _error(
                f"Unrecognized request argument supplied: {where}.{key} (a {role} message has no {key!r}).",
                f"{where}.{key}",
                "unknown_parameter",
            )
    out: dict[str, Any] = {"role": role, "content": _content_text(message.get("content"), where)}
    if role == "assistant":
        calls = message.get("tool_calls") or []
        if not isinstance(calls, list):
            raise _error(f"{where}.tool_calls must be a list.", f"{where}.tool_calls", "invalid_type")
        out["tool_calls"] = [_normalize_call(c, f"{where}.tool_calls[{j}]") for j, c in enumerate(calls)]
    elif out["content"] is None:
        raise _error(f"Missing required parameter: '{where}.content' (role {role!r}).", f"{where}.content")
    if role == "tool":
        call_id = message.get("tool_call_id")
        if not isinstance(call_id, str) or not call_id:
            raise _error(
                f"Missing required parameter: '{where}.tool_call_id' (a tool message answers the call with "
                "that id).",
                f"{where}.tool_call_id",
                "missing_required_parameter",
            )
        out["tool_call_id"] = call_id
    name = message.get("name")
    if name is not None:
        if not isinstance(name, str):
            raise _error(
                f"Invalid type for '{where}.name': expected a string.", f"{where}.name", "invalid_type"
            )
        out["name"] = name
    return out


def _normalize_call(call: Any, where: str) -> dict[str, Any]:
    if not isinstance(call, dict):
        raise _error(f"Invalid type for '{where}': expected an object.", where, "invalid_type")
    function = call.get("function")
    if not isinstance(function, dict) or not isinstance(function.get("name"), str):
        raise _error(f"Missing required parameter: '{where}.function.name'.", f"{where}.function")
    if call.get("type", "function") != "function":
        raise _error(
            f"Invalid value for '{where}.type': only 'function' calls are supported.", f"{where}.type"
        )
    if not isinstance(call.get("id", ""), str | None):
        raise _error(f"Invalid type for '{where}.id': expected a string.", f"{where}.id", "invalid_type")
    arguments = function.get("arguments", "{}")
    if not isinstance(arguments, str):
        arguments = json.dumps(arguments, ensure_ascii=False)
    try:
        json.loads(arguments)
    except (ValueError, RecursionError):
        raise _error(
            f"{where}.function.arguments is not valid JSON.", f"{where}.function.arguments"
        ) from None
    return {
        "id": call.get("id") or "",
        "type": "function",
        "function": {"name": function["name"], "arguments": arguments},
    }


def check_tool(tool: Any, index: int) -> None:
    """Raise OpenAIError(400) unless `tool` is {"type": "function", "function": {"name", ...}}."""
    where = f"tools[{index}]"
    if not isinstance(tool, dict) or tool.get("type") != "function":
        raise _error(f"{where}.type must be 'function'.", f"{where}.type")
    if set(tool) - {"type", "function"}:
        raise _error(
            f"Unrecognized request argument supplied: {where}.{sorted(set(tool) - {'type', 'function'})[0]}",
            where,
        )
    function = tool.get("function")
    if not isinstance(function, dict):
        raise _error(f"{where}.function must be an object.", f"{where}.function", "invalid_type")
    unknown = set(function) - {"name", "description", "parameters", "strict"}
    if unknown:
        raise _error(
            f"Unrecognized request argument supplied: {where}.function.{sorted(unknown)[0]}",
            f"{where}.function",
        )
    name = function.get("name")
    if not isinstance(name, str) or not _FUNCTION_NAME.match(name):
        raise _error(
            f"{where}.function.name must be 1-64 characters of letters, digits, '_', '-', '.' or ':'.",
            f"{where}.function.name",
        )
    if not isinstance(function.get("description"), str | None):
        raise _error(f"{where}.function.description must be a string.", f"{where}.function.description")
    if not isinstance(function.get("strict"), bool | None):
        raise _error(
            f"{where}.function.strict must be a boolean.", f"{where}.function.strict", "invalid_type"
        )
    parameters = function.get("parameters")
    if parameters is not None and (
        not isinstance(parameters, dict) or parameters.get("type", "object") != "object"
    ):
        raise _error(
            f"{where}.function.parameters must be a JSON schema object (type 'object').",
            f"{where}.function.parameters",
        )
