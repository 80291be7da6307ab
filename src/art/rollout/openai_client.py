"""What `Model.openai_client()` wraps around an `openai.AsyncOpenAI`'s `chat.completions`: the model's default
request body merged under each call's own, and each whole response handed to a callback (which prices it).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any


def deep_merge(base: dict[str, Any], updates: dict[str, Any]) -> dict[str, Any]:
    merged = dict(base)
    for key, value in updates.items():
        old = merged.get(key)
        merged[key] = deep_merge(old, value) if isinstance(old, dict) and isinstance(value, dict) else value
    return merged


class OpenAIChatCompletionsProxy:
    """`chat.completions` of a client from `Model.openai_client()` (the reference's name): `create(...)`
    adds the model's default request body (`extra_body`, deep-merged under the call's own) and hands each
    whole (not streamed) response to `on_response`, which prices it; everything else is the wrapped
    object's.

    Example:
        proxy = OpenAIChatCompletionsProxy(client.chat.completions, record, {"top_k": 20})
        await proxy.create(model="m", messages=msgs)  # sent with extra_body={"top_k": 20}
    """

    def __init__(
        self,
        completions: Any,
        on_response: Callable[[Any], None],
        default_extra_body: dict[str, Any] | None = None,
    ) -> None:
        self._completions = completions
        self._on_response = on_response
        self._default_extra_body = default_extra_body

    async def create(self, *args: Any, **kwargs: Any) -> Any:
        if self._default_extra_body:
            kwargs["extra_body"] = deep_merge(self._default_extra_body, kwargs.get("extra_body") or {})
        response = await self._completions.create(*args, **kwargs)
        if not kwargs.get("stream"):
            self._on_response(response)
        return response

    def __getattr__(self, name: str) -> Any:
        return getattr(self._completions, name)
