"""`format_message(message)`: one chat message as readable text, for logs and printing (the reference's).

>>> format_message({"role": "assistant", "content": "Let me look.",
...                 "tool_calls": [{"function": {"name": "search", "arguments": '{"q": "x"}'}}]})
'Assistant:\\nLet me look.\\nsearch({"q": "x"})'
"""

from __future__ import annotations

from typing import Any


def format_message(message: dict[str, Any]) -> str:
    """ "Role:" on a line, then the content (or refusal), then one `name(arguments)` line per tool call.

    Example:
        >>> format_message({"role": "user", "content": "Hi"})
        'User:\\nHi'
    """
    role = str(message.get("role", "")).capitalize()
    content = message.get("content") or message.get("refusal") or ""
    if isinstance(content, list):  # content parts: keep their text
        content = "".join(str(part.get("text", "")) for part in content if isinstance(part, dict))
    calls = [
        f"{call['function'].get('name')}({call['function'].get('arguments')})"
        for call in message.get("tool_calls") or []
        if isinstance(call, dict) and isinstance(call.get("function"), dict)
    ]
    return "\n".join([f"{role}:", *([content] if content else []), *calls])
