"""`OpenAIServerConfig`: the reference's `TrainableModel.register(backend, _openai_client_config=...)`.
Its `engine_args` apply as in `InternalModelConfig`; `server_args` and `log_file` have no effect here
(`LocalBackend(host=..., port=..., api_key=...)` sets the server). `get_openai_server_config` builds the
settings the reference starts vLLM with."""

from __future__ import annotations

from pathlib import PurePath

from typing_extensions import TypedDict

from art.dev.engine import EngineArgs


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


def get_openai_server_config(
    model_name: str,
    base_model: str,
    log_file: str,
    lora_path: str | None = None,
    config: OpenAIServerConfig | None = None,
) -> OpenAIServerConfig:
    """The vLLM server settings the reference starts for a model, with `config`'s entries on top.

    Server: key "default", token ids returned, tool calls parsed by `hermes`; with `lora_path` (a
    checkpoint folder named by its step) that adapter is served as `{model_name}@{step}` and the base
    model under its own name, else the base model is served as `model_name`. `config["log_file"]`,
    `server_args` and `engine_args` override the defaults key by key. Our vLLM engine builds its own
    command line (`art.engines.vllm.server_process`); this is for code that reads these settings.

    Example:
        >>> c = get_openai_server_config("agent", "Qwen/Qwen2.5-0.5B", "/tmp/v.log", "/r/checkpoints/0003")
        >>> c["server_args"]["lora_modules"], c["engine_args"]["served_model_name"]
        (['{"name": "agent@3", "path": "/r/checkpoints/0003"}'], 'Qwen/Qwen2.5-0.5B')
    """
    config = config or OpenAIServerConfig()
    lora_modules: list[str] | None = None
    if lora_path:
        step = int(PurePath(lora_path).name)
        lora_modules = [f'{{"name": "{model_name}@{step}", "path": "{lora_path}"}}']
    server_args = ServerArgs(
        api_key="default",
        lora_modules=lora_modules,
        return_tokens_as_token_ids=True,
        enable_auto_tool_choice=True,
        tool_call_parser="hermes",
    )
    server_args.update(config.get("server_args", {}))
    engine_args = EngineArgs(
        model=base_model,
        served_model_name=base_model if lora_path else model_name,
        generation_config="vllm",
    )
    engine_args.update(config.get("engine_args", {}))
    return OpenAIServerConfig(
        log_file=config.get("log_file", log_file), server_args=server_args, engine_args=engine_args
    )
