"""The reference's `/v1/preview/models`: serve a model (or find it), refuse to delete one, log groups to it."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, Response
from pydantic import ValidationError

from art.backends.remote_protocol import ModelCreate
from art.hub.api_errors import api_error, hub_error
from art.hub.models import HubError
from art.hub.routes.serverless.shared import PREFIX, body_of, hosted, serverless_model_id
from art.hub.routes.shared import BodyLimit, Hub
from art.record.storage import validate_name
from art.trajectories import TrajectoryGroup

DEFAULT_ENTITY = "local"

router = APIRouter(prefix=PREFIX, include_in_schema=False)


@router.post("/models")
async def create_model(request: Request, hub: Hub, body_limit: BodyLimit) -> JSONResponse:
    body = await body_of(request, body_limit)
    entity = body.get("entity") or DEFAULT_ENTITY
    try:
        spec = ModelCreate(
            project=body.get("project") or "",
            name=body.get("name") or "",
            base_model=body.get("base_model") or "",
        )
    except ValidationError as e:
        first = e.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "body"
        raise api_error(422, f"{where}: {first['msg']}", param=where) from None
    existed = (spec.project, spec.name) in hub.models
    if existed and body.get("return_existing") is False:
        raise api_error(409, f"model {spec.project}/{spec.name} exists; pass return_existing=true to use it")
    try:
        model, created = await hub.create(spec)
    except HubError as e:
        raise hub_error(e) from None
    info = {
        "id": serverless_model_id(spec.project, spec.name),
        "entity": entity,
        "project": spec.project,
        "name": spec.name,
        "base_model": model.spec.base_model,
        "run_id": spec.name,
    }
    return JSONResponse(info, status_code=201 if created else 200)


@router.delete("/models/{model_id}")
async def delete_model(model_id: str, hub: Hub) -> JSONResponse:
    hosted(hub, model_id)
    raise api_error(
        409,
        f"art serve does not delete models: {model_id}'s record (checkpoints, history) stays on the "
        "server; delete its checkpoints with DELETE .../checkpoints, or its folder by hand",
    )


@router.post("/models/{model_id}/log")
async def log(model_id: str, request: Request, hub: Hub, body_limit: BodyLimit) -> Response:
    model = hosted(hub, model_id)
    body = await body_of(request, body_limit)
    split = body.get("split") or "val"
    try:
        validate_name(split, "split")
    except ValueError as e:
        raise api_error(422, f"split: {e}", param="split") from None
    groups = groups_of(body.get("trajectory_groups"))
    model.service.storage.append_groups(split, model.service.step, groups)
    return Response(status_code=200, content="null", media_type="application/json")


def groups_of(raw: Any, where: str = "trajectory_groups") -> list[TrajectoryGroup]:
    """`raw` (a body's field, named `where` in errors) as trajectory groups, or a 422 naming the bad one."""
    if not isinstance(raw, list):
        raise api_error(422, f"{where}: a list of trajectory groups is required", param=where)
    groups = []
    for i, group in enumerate(raw):
        try:
            groups.append(TrajectoryGroup.model_validate(group))
        except (ValidationError, TypeError, ValueError) as e:
            raise api_error(422, f"{where}[{i}]: {str(e).splitlines()[0]}", param=f"{where}[{i}]") from None
    return groups
