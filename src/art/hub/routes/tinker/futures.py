"""`POST /api/v1/retrieve_future`: a future's answer, held until it is ready (or try_again after a while).

Results of forward_backward, forward and sample go out as protobuf (the SDK reads those only so), the
others as JSON; failed work is a 200 whose JSON says `error` and `category` (the SDK raises
`RequestFailedError` from it).
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Response

from art.hub.routes.tinker.shared import JsonBody, Tinker

router = APIRouter()


@router.post("/retrieve_future", response_model=None)
async def retrieve_future(tinker: Tinker, body: JsonBody) -> dict[str, Any] | Response:
    request_id = str(body.get("request_id"))
    result = await tinker.futures.poll(request_id)
    if result is None:
        return {"type": "try_again", "request_id": request_id, "queue_state": "active"}
    if isinstance(result, bytes):
        return Response(content=result, media_type="application/x-protobuf")
    return result
