"""What the reference's serverless routes share: their prefix, the model id (`"project:name"`) and the
model it names, the reference's metric names, list pages, and the model names its chats use."""

from __future__ import annotations

import re
from typing import Any

from fastapi import Request

from art.hub.api_errors import api_error, hub_error
from art.hub.models import HostedModel, HubError, ServiceHub
from art.hub.request_body import json_object, read_body
from art.metrics.taxonomy import TRAINER_METRIC_NAMES

PREFIX = "/v1/preview"
_ARTIFACT = re.compile(
    r"^wandb-artifact:///(?P<entity>[^/]+)/(?P<project>[^/]+)/(?P<name>[^/:]+)(?::(?P<tag>[^/]+))?$"
)


def serverless_model_id(project: str, name: str) -> str:
    """The reference client's model id for a served model: "project:name"."""
    return f"{project}:{name}"


def hosted(hub: ServiceHub, model_id: str) -> HostedModel:
    """The model a reference model id (`"project:name"`) names, or a 404."""
    project, colon, name = model_id.partition(":")
    if not colon:
        raise api_error(404, f"no model {model_id!r} on this server (model ids look like 'project:name')")
    try:
        return hub.get(project, name)
    except HubError as e:
        raise hub_error(e) from None


async def body_of(request: Request, limit: int) -> dict[str, Any]:
    """The request's body, a JSON object of at most `limit` bytes (else 413/422)."""
    return json_object(await read_body(request, limit))


def reference_metrics(values: dict[str, Any]) -> dict[str, float]:
    """A step's metrics as the reference's client takes them: numbers only (it sends each to `float`), those
    with a name in its taxonomy (`loss/train`, `data/step_trainer_tokens`, `time/step_trainer_s`, ...)."""
    out: dict[str, float] = {}
    for key, value in values.items():
        name = TRAINER_METRIC_NAMES.get(key, key)
        if "/" in name and isinstance(value, int | float) and not isinstance(value, bool):
            out[name] = float(value)
    return out


def page(items: list[dict[str, Any]], limit: int) -> dict[str, Any]:
    """The first `limit` items as the reference's list page."""
    return {"object": "list", "data": items[:limit], "has_more": len(items) > limit}


def artifact_name_resolver(hub: ServiceHub) -> Any:
    """A resolver for `EngineRouter.add_alias`: `wandb-artifact:///entity/project/name[:stepN|:latest]` of a
    model served here -> `name` (its newest step) or `name@N`; None for anything else."""

    def resolve(model: str) -> str | None:
        match = _ARTIFACT.match(model)
        if match is None:
            return None
        hosted = hub.models.get((match["project"], match["name"]))
        if hosted is None:
            return None
        tag = match["tag"]
        if tag is None or tag == "latest":
            return hosted.spec.name
        if tag.startswith("step") and tag[4:].isdigit():
            return hosted.service.served_name(int(tag[4:]))
        return None

    return resolve
