"""Served model names -> the engine serving them (`EngineRouter`): one OpenAI-compatible app in front of
several engines (`art serve` serves every model on one port; `art.openai_server.http.create_app` one engine
through a router of one)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from art.engines.base import ChatForwardingEngine, Engine, ModelNotFoundError
from art.openai_server.chat_completions import ChatCompletions
from art.openai_server.completions import TextCompletions
from art.openai_server.errors import OpenAIError
from art.openai_server.generation import DEFAULT_STREAM_CHUNK_RATE, DEFAULT_STREAM_INTERVAL, engine_error


@dataclass
class _Route:
    """One engine behind the app, with its handlers (its tokenizer and chat template render its prompts)."""

    engine: Engine
    chat: ChatCompletions
    completions: TextCompletions


class EngineRouter:
    """Served model names -> the engine serving them: one OpenAI-compatible app in front of several engines.

    Each engine gets its own `ChatCompletions` and `TextCompletions`. A name is looked up in every engine's
    `model_names()` at each request, so adapters an engine loads or unloads are routed at once. Engines
    that serve the same name (e.g. two models over one base model): the first added wins. A request for a
    name no engine serves is a 404 (`model_not_found`) listing the served names, then `not_found_hint`
    (what to do; `art serve` says how to add a model). Example:
        router = EngineRouter(); router.add(engine_a); router.add(engine_b)
        app = create_app(router, api_key="...")
    """

    def __init__(
        self,
        *,
        stream_interval: float = DEFAULT_STREAM_INTERVAL,
        stream_chunk_rate: float | None = DEFAULT_STREAM_CHUNK_RATE,
        max_prompt_chars: int | None = None,
        not_found_hint: str = "",
    ) -> None:
        self.stream_interval = stream_interval
        self.not_found_hint = not_found_hint
        self.stream_chunk_rate = stream_chunk_rate
        self.max_prompt_chars = max_prompt_chars
        self._routes: list[_Route] = []
        self._aliases: list[Callable[[str], str | None]] = []

    def add_alias(self, resolve: Callable[[str], str | None]) -> None:
        """Also accept other spellings of served names: `resolve(name)` returns the served name a request's
        `model` means, or None (e.g. `art serve` maps the reference's serverless names,
        `wandb-artifact:///entity/project/name:step3`, to `name@3`)."""
        self._aliases.append(resolve)

    def resolve_name(self, model: str) -> str:
        """The served name a request's `model` means: itself, or what an alias resolver says."""
        for resolve in self._aliases:
            served = resolve(model)
            if served is not None:
                return served
        return model

    def resolve_body(self, body: Any) -> Any:
        """A request body with its `model` resolved (`resolve_name`); anything else as it is."""
        if isinstance(body, dict) and isinstance(body.get("model"), str) and self._aliases:
            body = {**body, "model": self.resolve_name(body["model"])}
        return body

    def add(self, engine: Engine) -> ChatCompletions:
        """Route `engine`'s names to it; returns its chat-completions handler."""
        pacing: dict[str, Any] = {
            "stream_interval": self.stream_interval,
            "stream_chunk_rate": self.stream_chunk_rate,
            "max_prompt_chars": self.max_prompt_chars,
        }
        route = _Route(engine, ChatCompletions(engine, **pacing), TextCompletions(engine, **pacing))
        self._routes.append(route)
        return route.chat

    def remove(self, engine: Engine) -> None:
        """Stop routing to `engine` (requests already running finish)."""
        self._routes = [r for r in self._routes if r.engine is not engine]

    def clear(self) -> None:
        """Stop routing to every engine (each name then answers 404)."""
        self._routes = []

    def _route(self, model: str) -> _Route:
        for route in self._routes:
            if model in route.engine.model_names():
                return route
        raise self.not_found(model)

    def not_found(self, model: str, shown: int = 20) -> OpenAIError:
        """The 404 for a `model` no engine serves: the served names (the first `shown`), then the hint."""
        error = engine_error(ModelNotFoundError(model))
        served = self.model_names()
        listed = ", ".join(served[:shown]) + (
            f" and {len(served) - shown} more" if len(served) > shown else ""
        )
        message = f"{error.message.rstrip('.')} on this server. Served models: {listed or 'none'}."
        error.message = f"{message} {self.not_found_hint}".strip()
        return error

    def chat_for(self, model: str) -> ChatCompletions:
        """The chat handler of the engine serving `model`; an OpenAI 404 (`model_not_found`) if none does."""
        return self._route(model).chat

    def completions_for(self, model: str) -> TextCompletions:
        """The `/v1/completions` handler of the engine serving `model`; a 404 if none does."""
        return self._route(model).completions

    def forwarding_engine_for(self, body: Any) -> ChatForwardingEngine | None:
        """The engine a chat request body goes to whole (e.g. vLLM's), if its model is served by one; None
        otherwise, also for a body too malformed to name a model (our own validation then says why)."""
        model = body.get("model") if isinstance(body, dict) else None
        if not isinstance(model, str):
            return None
        for route in self._routes:
            if model in route.engine.model_names():
                return route.engine if isinstance(route.engine, ChatForwardingEngine) else None
        return None

    def model_names(self) -> list[str]:
        """Every name served, once, in the order engines were added."""
        return list(dict.fromkeys(name for r in self._routes for name in r.engine.model_names()))
