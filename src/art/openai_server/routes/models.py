"""`GET /v1/models`: every model name the app's engines serve (adapters `name@step` included), OpenAI's
list shape."""

from __future__ import annotations

import time
from typing import Any

from fastapi import APIRouter

from art.openai_server.routes.shared import AppFront

router = APIRouter()


@router.get("/v1/models")
async def models(front: AppFront) -> dict[str, Any]:
    created = int(time.time())
    return {
        "object": "list",
        "data": [
            {"id": name, "object": "model", "created": created, "owned_by": "art"}
            for name in front.router.model_names()
        ],
    }
