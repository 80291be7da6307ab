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

from art.backends.remote_protocol import ModelCreate, TrainingJobCreate
from art.hub.routes import checkpoints, models, training_jobs


def create_api() -> APIRouter:
    """The `/v1/art/` router: the routers of `art.hub.routes`, one per resource. Include it in an app that
    `art.hub.routes.shared.attach` gave its hub (the routes take the hub and the body limit from there)."""
    api = APIRouter()
    for routes in (models, training_jobs, checkpoints):
        api.include_router(routes.router)
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
