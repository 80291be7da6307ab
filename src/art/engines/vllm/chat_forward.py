"""`/v1/chat/completions` forwarded to vLLM, so that user code does not change with the engine.

Our server stays in front of vLLM's (the cost of that hop is measured in `benchmarks/bench_engines.py`
and quoted in docs/gpu.md) because it keeps the promises the torch engine makes:
- the same base URL and API key (vLLM's server has its own random key and binds 127.0.0.1);
- the same names: `name` is an alias of the newest `name@step`, resolved here per request;
- every choice trainable: `logprobs` and `return_token_ids` are always asked for (a user's rollout need not
  ask), so the choice carries `token_ids` and `logprobs.content` with `token_id:<id>` tokens
  (`--return-tokens-as-token-ids`), and training re-tokenises nothing; `checkpoint_step` is added;
- held while a step trains, a 503 naming the cause when vLLM's server is gone.
Tool calls are parsed by vLLM's `hermes` parser (`--enable-auto-tool-choice --tool-call-parser hermes`).
Streams pass through byte for byte.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from typing import Any, Protocol

import httpx

from art.engines.base import EngineUnavailableError, ForwardedResponse


class VllmUpstream(Protocol):
    """What forwarding needs of the vLLM engine (`VllmEngine` is one; it imports this module, not back)."""

    def resolve(self, name: str) -> tuple[str, int | None]:
        """(the name vLLM serves, its checkpoint step) for a name of ours."""
        ...

    async def admit(self) -> None:
        """Wait while paused, then count the request as running."""
        ...

    def release(self) -> None:
        """A request admitted by `admit` has ended."""
        ...

    def client(self) -> httpx.AsyncClient:
        """An HTTP client to vLLM for the running event loop."""
        ...

    async def post(self, path: str, body: dict[str, Any]) -> httpx.Response:
        """POST to vLLM; a dead server becomes EngineUnavailableError."""
        ...

    def unavailable(self, exc: BaseException | None) -> EngineUnavailableError:
        """The 503 error naming why vLLM's server is gone."""
        ...


def upstream_body(body: dict[str, Any], served: str) -> dict[str, Any]:
    """The request vLLM gets: the served name, and token ids with their logprobs always asked for.

    Example:
        upstream_body({"model": "agent", "messages": [...]}, "agent@3")
        # {"model": "agent@3", "messages": [...], "logprobs": True, "top_logprobs": 0, "return_token_ids": True}
    """
    out = {**body, "model": served, "logprobs": True, "return_token_ids": True}
    if not body.get("logprobs") or out.get("top_logprobs") is None:
        out["top_logprobs"] = 0
    return out


async def forward_chat(engine: VllmUpstream, body: dict[str, Any]) -> ForwardedResponse:
    """Send one chat request to vLLM and return its answer (a JSON body, or the stream's bytes)."""
    requested = body.get("model")
    if not isinstance(requested, str):
        return ForwardedResponse(
            400, {"error": {"message": "`model` is required (a string)", "type": "invalid_request_error",
                            "param": "model", "code": None}}
        )  # fmt: skip
    served, step = engine.resolve(requested)
    upstream = upstream_body(body, served)
    await engine.admit()
    if upstream.get("stream"):
        return await _stream(engine, upstream)
    started = time.perf_counter()
    try:
        response = await engine.post("/v1/chat/completions", upstream)
    finally:
        engine.release()
    upstream_s = time.perf_counter() - started
    data = _json_body(response)
    if response.status_code < 400:
        for choice in data.get("choices", []):
            choice["checkpoint_step"] = step
    return ForwardedResponse(response.status_code, data, upstream_s=upstream_s)


async def _stream(engine: VllmUpstream, upstream: dict[str, Any]) -> ForwardedResponse:
    client = engine.client()
    started = time.perf_counter()
    try:
        request = client.build_request("POST", "/v1/chat/completions", json=upstream)
        response = await client.send(request, stream=True)
    except httpx.TransportError as exc:
        engine.release()
        raise engine.unavailable(exc) from None
    if response.status_code >= 400:
        try:
            await response.aread()
            data = _json_body(response)
        finally:
            await response.aclose()
            engine.release()
        return ForwardedResponse(response.status_code, data, upstream_s=time.perf_counter() - started)

    async def chunks() -> AsyncIterator[bytes]:
        try:
            async for chunk in response.aiter_raw():
                yield chunk
        finally:
            await response.aclose()
            engine.release()

    return ForwardedResponse(200, None, chunks(), upstream_s=time.perf_counter() - started)


def _json_body(response: httpx.Response) -> Any:
    """vLLM's JSON answer, or an OpenAI-shaped error carrying its text when it is not JSON."""
    try:
        return response.json()
    except ValueError:
        message = f"vLLM answered {response.status_code} with a non-JSON body: {response.text[:500]}"
        return {"error": {"message": message, "type": "server_error", "param": None, "code": None}}
