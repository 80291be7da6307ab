"""The `/v1/art/` API of `art serve`: its routers mounted under one prefix, and its OpenAPI document.

The routes live one resource per module in `art.hub.routes` (models, training jobs and their events,
checkpoints); shapes are in `art.backends.remote_protocol`, the work is the hub's (`art.hub.models`) and the
jobs' (`art.hub.jobs`). Every bad request gets a 4xx in OpenAI's error shape (`art.hub.api_errors`),
decided before anything is queued: 401 (the app's key middleware), 404 unknown model, job or checkpoint,
409 conflicts, 413 bodies over the limit, 415 unknown content encodings, 422 naming the field
(`art.hub.request_body`), 507 when the server's disk refuses a write.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, FastAPI
from pydantic.json_schema import models_json_schema

from art.backends.remote_protocol import API_PREFIX, DEFAULT_MAX_BODY_BYTES, ModelCreate, TrainingJobCreate
from art.hub.api_errors import ERROR_RESPONSES
from art.hub.models import ServiceHub
from art.hub.routes.checkpoints import add_checkpoint_routes
from art.hub.routes.models import add_model_routes
from art.hub.routes.training_jobs import add_training_job_routes


def create_api(hub: ServiceHub, *, max_body_bytes: int = DEFAULT_MAX_BODY_BYTES) -> APIRouter:
    """The `/v1/art/` router over `hub`; include it in the app `create_app(hub.router, ...)` returns."""
    api = APIRouter(prefix=API_PREFIX, responses=ERROR_RESPONSES)
    # one flat router (FastAPI 0.165 would keep an included router whole, its routes out of `api.routes`)
    for add_routes in (add_model_routes, add_training_job_routes, add_checkpoint_routes):
        add_routes(api, hub, max_body_bytes=max_body_bytes)
    return api


def openapi_document(api: APIRouter) -> dict[str, Any]:
    """The OpenAPI document of the `/v1/art/` routes (`create_api`'s router); docs/remote-openapi.json."""
    doc_app = FastAPI(
        title="ART training API (art serve)",
        version="1",
        description=(
            "The training side of `art serve`. Every route needs `Authorization: Bearer <key>`. The "
            "OpenAI-compatible routes (/v1/chat/completions, /v1/models) are served on the same port."
        ),
    )
    doc_app.include_router(api)
    doc = doc_app.openapi()
    _, defs = models_json_schema(
        [(m, "validation") for m in (ModelCreate, TrainingJobCreate)],
        ref_template="#/components/schemas/{model}",
    )
    doc.setdefault("components", {}).setdefault("schemas", {}).update(defs.get("$defs", {}))
    return doc
