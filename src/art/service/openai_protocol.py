"""The OpenAI chat-completions wire format as the server accepts it: request model, validation, errors.

`ChatCompletionRequest.parse(body)` validates a decoded JSON body and raises `OpenAIError` (HTTP 400 with
the offending parameter named) for anything the engine cannot serve faithfully: unknown roles, bad tool
schemas, `max_tokens` < 1, unsupported options with non-default values (penalties, `logit_bias`,
`tool_choice` "required" or a named function, non-text content parts). Unknown extra fields are ignored,
as OpenAI-compatible servers do (clients send vendor extras such as `return_token_ids`).

Messages come out normalised for the chat template: content is a string or None (lists of text parts are
joined), tool-call arguments are JSON strings.
"""

from __future__ import annotations

import json
import re
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

ROLES = ("system", "developer", "user", "assistant", "tool")
_FUNCTION_NAME = re.compile(r"^[A-Za-z0-9_.:-]{1,64}$")


class OpenAIError(Exception):
    """An error answered in OpenAI's shape: {"error": {"message", "type", "param", "code"}}."""

    def __init__(
        self,
        status: int,
        message: str,
        *,
        type: str = "invalid_request_error",
        param: str | None = None,
        code: str | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.type = type
        self.param = param
        self.code = code

    def body(self) -> dict[str, Any]:
        """The JSON body of the error response."""
        return {"error": {"message": self.message, "type": self.type, "param": self.param, "code": self.code}}


def bad_request(message: str, param: str | None = None, code: str | None = None) -> OpenAIError:
    """A 400 invalid_request_error."""
    return OpenAIError(400, message, param=param, code=code)


class StreamOptions(BaseModel):
    """`stream_options`: usage is always sent at the end of a stream; the flag is accepted."""

    include_usage: bool | None = None


class ChatCompletionRequest(BaseModel):
    """The fields of POST /v1/chat/completions that the server acts on."""

    model_config = ConfigDict(extra="ignore")

    model: str
    messages: list[dict[str, Any]] = Field(min_length=1)
    tools: list[dict[str, Any]] | None = None
    tool_choice: Literal["auto", "none"] | dict[str, Any] | str | None = None
    temperature: float | None = Field(None, ge=0.0, le=2.0)
    top_p: float | None = Field(None, gt=0.0, le=1.0)
    max_tokens: int | None = Field(None, ge=1)
    max_completion_tokens: int | None = Field(None, ge=1)
    n: int = Field(1, ge=1, le=128)
    stop: str | list[str] | None = None
    seed: int | None = None
    logprobs: bool | None = None
    top_logprobs: int | None = Field(None, ge=0, le=20)
    stream: bool = False
    stream_options: StreamOptions | None = None
    presence_penalty: float | None = None
    frequency_penalty: float | None = None
    logit_bias: dict[str, float] | None = None
    parallel_tool_calls: bool | None = None
    user: str | None = None
    # vLLM's extension (pass it in `extra_body`): generate exactly max_tokens, past end-of-turn tokens
    ignore_eos: bool = False

    @field_validator("stop")
    @classmethod
    def _stop_list(cls, value: str | list[str] | None) -> str | list[str] | None:
        if isinstance(value, list) and not all(isinstance(s, str) for s in value):
            raise ValueError("stop must be a string or a list of strings")
        return value

    @classmethod
    def parse(cls, body: Any) -> ChatCompletionRequest:
        """Validate a decoded JSON body; raises OpenAIError(400) naming the offending parameter."""
        if not isinstance(body, dict):
            raise bad_request("The request body must be a JSON object.")
        try:
            request = cls.model_validate(body)
        except ValidationError as e:
            first = e.errors()[0]
            param = ".".join(str(p) for p in first["loc"]) or None
            raise bad_request(f"Invalid value for '{param}': {first['msg']}", param=param) from None
        request._check_unsupported()
        request.messages = [normalize_message(m, i) for i, m in enumerate(request.messages)]
        if request.tools:
            for i, tool in enumerate(request.tools):
                check_tool(tool, i)
        return request

    def _check_unsupported(self) -> None:
        for name in ("presence_penalty", "frequency_penalty"):
            if getattr(self, name):
                raise bad_request(f"'{name}' is not supported by this server (use 0 or omit it).", param=name)
        if self.logit_bias:
            raise bad_request("'logit_bias' is not supported by this server.", param="logit_bias")
        if self.tool_choice not in (None, "auto", "none"):
            raise bad_request(
                "Only tool_choice 'auto' and 'none' are supported by this server.", param="tool_choice"
            )
        if self.top_logprobs and not self.logprobs:
            raise bad_request("'top_logprobs' requires 'logprobs' to be true.", param="top_logprobs")

    @property
    def stop_list(self) -> list[str]:
        """Stop strings as a list."""
        if self.stop is None:
            return []
        return [self.stop] if isinstance(self.stop, str) else list(self.stop)

    @property
    def max_new_tokens(self) -> int | None:
        """`max_completion_tokens`, else `max_tokens`, else None (until the context window is full)."""
        return self.max_completion_tokens if self.max_completion_tokens is not None else self.max_tokens

    @property
    def parse_tools(self) -> bool:
        """Whether tool calls are parsed out of replies (tools given and tool_choice is not "none")."""
        return bool(self.tools) and self.tool_choice != "none"


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
                raise bad_request(
                    f"{where}.content[{j}]: only text parts are supported by this server.",
                    param=f"{where}.content",
                )
            texts.append(part["text"])
        return "".join(texts)
    raise bad_request(
        f"{where}.content must be a string, null or a list of text parts.", param=f"{where}.content"
    )


def normalize_message(message: Any, index: int) -> dict[str, Any]:
    """A message checked and normalised for the chat template (see the module docstring)."""
    where = f"messages[{index}]"
    if not isinstance(message, dict):
        raise bad_request(f"{where} must be an object.", param=where)
    role = message.get("role")
    if role not in ROLES:
        raise bad_request(
            f"Invalid value for '{where}.role': {role!r}. Supported roles: {', '.join(ROLES)}.",
            param=f"{where}.role",
        )
    out: dict[str, Any] = {"role": role, "content": _content_text(message.get("content"), where)}
    if role == "assistant":
        calls = message.get("tool_calls") or []
        if not isinstance(calls, list):
            raise bad_request(f"{where}.tool_calls must be a list.", param=f"{where}.tool_calls")
        out["tool_calls"] = [_normalize_call(c, f"{where}.tool_calls[{j}]") for j, c in enumerate(calls)]
    elif out["content"] is None:
        raise bad_request(f"{where}.content is required for role {role!r}.", param=f"{where}.content")
    if role == "tool":
        out["tool_call_id"] = message.get("tool_call_id")
    if isinstance(message.get("name"), str):
        out["name"] = message["name"]
    return out


def _normalize_call(call: Any, where: str) -> dict[str, Any]:
    function = call.get("function") if isinstance(call, dict) else None
    if not isinstance(function, dict) or not isinstance(function.get("name"), str):
        raise bad_request(f"{where}.function.name is required.", param=f"{where}.function")
    arguments = function.get("arguments", "{}")
    if not isinstance(arguments, str):
        arguments = json.dumps(arguments, ensure_ascii=False)
    try:
        json.loads(arguments)
    except json.JSONDecodeError:
        raise bad_request(
            f"{where}.function.arguments is not valid JSON.", param=f"{where}.function.arguments"
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
        raise bad_request(f"{where}.type must be 'function'.", param=f"{where}.type")
    function = tool.get("function")
    if not isinstance(function, dict):
        raise bad_request(f"{where}.function must be an object.", param=f"{where}.function")
    name = function.get("name")
    if not isinstance(name, str) or not _FUNCTION_NAME.match(name):
        raise bad_request(
            f"{where}.function.name must be 1-64 characters of letters, digits, '_', '-', '.' or ':'.",
            param=f"{where}.function.name",
        )
    if "description" in function and not isinstance(function["description"], str | None):
        raise bad_request(
            f"{where}.function.description must be a string.", param=f"{where}.function.description"
        )
    parameters = function.get("parameters")
    if parameters is not None and (
        not isinstance(parameters, dict) or parameters.get("type", "object") != "object"
    ):
        raise bad_request(
            f"{where}.function.parameters must be a JSON schema object (type 'object').",
            param=f"{where}.function.parameters",
        )
