"""`/v1/art/models`: serve a trainable model (or find it), list the served models, read one."""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse
from pydantic import ValidationError

from art.backends.remote_protocol import ModelCreate, ModelInfo, ModelList
from art.hub.api_errors import hosted_model, hub_error, validation_error
from art.hub.models import HubError, ServiceHub
from art.hub.request_body import body_schema, json_object, read_body


def add_model_routes(router: APIRouter, hub: ServiceHub, *, max_body_bytes: int) -> None:
    """The model routes over `hub`, added to `router` (bodies up to `max_body_bytes`)."""

    @router.post(
        "/models",
        response_model=ModelInfo,
        summary="Serve a trainable model (or find it, when it is already served)",
        openapi_extra=body_schema(ModelCreate),
        responses={409: {"description": "The name is taken by another model"}},
    )
    async def create_model(request: Request) -> JSONResponse:
        try:
            spec = ModelCreate.model_validate(json_object(await read_body(request, max_body_bytes)))
        except ValidationError as e:
            raise validation_error(e) from None
        try:
            model, created = await hub.create(spec)
        except HubError as e:
            raise hub_error(e) from None
        return JSONResponse(model.info().model_dump(mode="json"), status_code=201 if created else 200)

    @router.get("/models", response_model=ModelList, summary="The models this server serves")
    async def list_models() -> ModelList:
        return ModelList(data=[m.info() for m in hub.models.values()])

    @router.get("/models/{project}/{name}", response_model=ModelInfo, summary="One served model and its step")
    async def get_model(project: str, name: str) -> ModelInfo:
        info: ModelInfo = hosted_model(hub, project, name).info()
        return info
