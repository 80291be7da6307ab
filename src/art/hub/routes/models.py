"""`/v1/art/models`: serve a trainable model (or find it), list the served models, read one."""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse
from pydantic import ValidationError

from art.backends.remote_protocol import API_PREFIX, ModelCreate, ModelInfo, ModelList
from art.hub.api_errors import ERROR_RESPONSES, hosted_model, hub_error, validation_error
from art.hub.models import HubError
from art.hub.request_body import body_schema, json_object, read_body
from art.hub.routes.shared import BodyLimit, Hub

router = APIRouter(prefix=API_PREFIX, responses=ERROR_RESPONSES)


@router.post(
    "/models",
    response_model=ModelInfo,
    summary="Serve a trainable model (or find it, when it is already served)",
    openapi_extra=body_schema(ModelCreate),
    responses={409: {"description": "The name is taken by another model"}},
)
async def create_model(request: Request, hub: Hub, body_limit: BodyLimit) -> JSONResponse:
    try:
        spec = ModelCreate.model_validate(json_object(await read_body(request, body_limit)))
    except ValidationError as e:
        raise validation_error(e) from None
    try:
        model, created = await hub.create(spec)
    except HubError as e:
        raise hub_error(e) from None
    return JSONResponse(model.info().model_dump(mode="json"), status_code=201 if created else 200)


@router.get("/models", response_model=ModelList, summary="The models this server serves")
async def list_models(hub: Hub) -> ModelList:
    return ModelList(data=[m.info() for m in hub.models.values()])


@router.get("/models/{project}/{name}", response_model=ModelInfo, summary="One served model and its step")
async def get_model(project: str, name: str, hub: Hub) -> ModelInfo:
    info: ModelInfo = hosted_model(hub, project, name).info()
    return info
