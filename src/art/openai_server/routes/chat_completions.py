"""`POST /v1/chat/completions`: validated and rendered by our `ChatCompletions` (see
`art.openai_server.chat_completions`), or handed whole to an engine that serves chat itself (vLLM: its own
template and tool parser)."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, Response, StreamingResponse

from art.engines.base import ChatForwardingEngine, EngineError
from art.openai_server.engine_router import EngineRouter
from art.openai_server.errors import bad_request
from art.openai_server.generation import Completions, Prepared, engine_error
from art.openai_server.protocol import ChatCompletionRequest
from art.openai_server.routes.shared import AppFront, JsonBody, respond

router = APIRouter()


@router.post("/v1/chat/completions", response_model=None)
async def chat_completions(request: Request, front: AppFront, body: JsonBody) -> Response:
    forwarding = front.router.forwarding_engine_for(body)
    if forwarding is not None:
        return await _forward(forwarding, body)
    return await respond(request, front, *await front.off_loop(_prepare, front.router, body))


def _prepare(router: EngineRouter, body: Any) -> tuple[Completions, Prepared]:
    """Validate `body` and render its prompt, with the handler of the engine serving its model."""
    parsed = ChatCompletionRequest.parse(body)
    chat = router.chat_for(parsed.model)
    return chat, chat.prepare(parsed)


async def _forward(engine: ChatForwardingEngine, body: Any) -> Response:
    if not isinstance(body, dict):
        raise bad_request("The request body must be a JSON object.")
    try:
        answer = await engine.forward_chat(body)
    except EngineError as exc:
        raise engine_error(exc) from None
    headers = None if answer.upstream_s is None else {"Server-Timing": server_timing(answer.upstream_s)}
    if answer.stream is not None:
        return StreamingResponse(answer.stream, media_type="text/event-stream", headers=headers)
    return JSONResponse(answer.body, status_code=answer.status, headers=headers)


def server_timing(upstream_s: float) -> str:
    """The `Server-Timing` header (W3C) of a forwarded answer: how long the engine's own server took.

    Example:
        server_timing(0.0123)  # "upstream;dur=12.300"
    """
    return f"upstream;dur={upstream_s * 1000:.3f}"
