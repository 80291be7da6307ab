"""`OpenAIServerConfig`: the reference's `TrainableModel.register(backend, _openai_client_config=...)`.
Its `engine_args` apply as in `InternalModelConfig`; `server_args` and `log_file` have no effect here
(`LocalBackend(host=..., port=..., api_key=...)` sets the server)."""

from __future__ import annotations

from typing_extensions import TypedDict

from .engine import EngineArgs


class ServerArgs(TypedDict, total=False):
    """vLLM OpenAI-server arguments (no effect here)."""

    host: str | None
    port: int
    api_key: str | None
    lora_modules: list[str] | None
    return_tokens_as_token_ids: bool
    enable_auto_tool_choice: bool
    tool_call_parser: str | None
    chat_template: str | None
    uvicorn_log_level: str


class OpenAIServerConfig(TypedDict, total=False):
    """Server settings: `engine_args` apply where they mean something here."""

    log_file: str
    server_args: ServerArgs
    engine_args: EngineArgs
