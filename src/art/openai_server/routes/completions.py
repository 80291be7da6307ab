"""`POST /v1/completions`: a text completion of a raw prompt (see `art.openai_server.completions`)."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import Response

from art.openai_server.completions import CompletionRequest
from art.openai_server.engine_router import EngineRouter
from art.openai_server.generation import Completions, Prepared
from art.openai_server.routes.shared import AppFront, JsonBody, respond

router = APIRouter()


@router.post("/v1/completions", response_model=None)
async def completions(request: Request, front: AppFront, body: JsonBody) -> Response:
    return await respond(request, front, *await front.off_loop(_prepare, front.router, body))


def _prepare(router: EngineRouter, body: Any) -> tuple[Completions, Prepared]:
    """Validate `body` and tokenize its prompt, with the handler of the engine serving its model."""
    parsed = CompletionRequest.parse(body)
    text = router.completions_for(parsed.model)
    return text, text.prepare(parsed)
