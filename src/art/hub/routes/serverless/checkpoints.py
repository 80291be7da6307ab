"""The reference's `/v1/preview/models/{id}/checkpoints`: a cursor page of them, and deleting some."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Query, Request

from art.hub.api_errors import api_error
from art.hub.routes.serverless.shared import PREFIX, body_of, hosted, page, reference_metrics
from art.hub.routes.shared import BodyLimit, Hub

router = APIRouter(prefix=PREFIX, include_in_schema=False)


@router.get("/models/{model_id}/checkpoints")
async def list_checkpoints(
    model_id: str,
    hub: Hub,
    after: str | None = None,
    limit: Annotated[int, Query(ge=1, le=1000)] = 100,
    order: Annotated[str, Query(pattern="^(asc|desc)$")] = "asc",
) -> dict[str, Any]:
    storage = hosted(hub, model_id).service.storage
    steps = storage.checkpoint_steps()
    if order == "desc":
        steps = steps[::-1]
    if after is not None:
        if not after.isdigit():
            raise api_error(422, "after: a checkpoint id (its step) is required", param="after")
        cursor = int(after)
        steps = [s for s in steps if (s > cursor if order == "asc" else s < cursor)]
    items = []
    for step in steps[: limit + 1]:
        try:
            metrics = reference_metrics(storage.read_checkpoint_manifest(step).get("metrics") or {})
        except (OSError, ValueError):
            metrics = {}
        items.append({"id": str(step), "step": step, "metrics": metrics})
    return page(items, limit)


@router.delete("/models/{model_id}/checkpoints")
async def delete_checkpoints(
    model_id: str, request: Request, hub: Hub, body_limit: BodyLimit
) -> dict[str, Any]:
    service = hosted(hub, model_id).service
    steps = (await body_of(request, body_limit)).get("steps")
    if not isinstance(steps, list) or not all(isinstance(s, int) and not isinstance(s, bool) for s in steps):
        raise api_error(422, "steps: a list of step numbers is required", param="steps")
    if service.step in steps:
        raise api_error(409, f"checkpoint {service.step} is the step the model serves; it is never deleted")
    present = service.storage.checkpoint_steps()
    wanted = {s for s in steps if s in present}
    deleted = await service.delete_checkpoints([s for s in present if s not in wanted])
    return {"deleted_count": len(deleted), "not_found_steps": sorted(set(steps) - set(present))}
