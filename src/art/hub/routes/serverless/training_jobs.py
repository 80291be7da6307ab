"""The reference's `/v1/preview/training-jobs`: queue a step as a job of ours, its events as the reference
names them; SFT jobs (from a W&B artifact) are refused."""

from __future__ import annotations

import hashlib
import json
import warnings
from typing import Annotated, Any

from fastapi import APIRouter, Query, Request
from fastapi.responses import JSONResponse

from art.backends.remote_protocol import TrainingJobEvent
from art.backends.train_options import resolve_train_kwargs, valid_keywords
from art.hub.api_errors import api_error, find_job_queue
from art.hub.request_body import json_object, parse_training_job, read_body
from art.hub.routes.serverless.shared import PREFIX, body_of, hosted, page, reference_metrics
from art.hub.routes.shared import BodyLimit, Hub

router = APIRouter(prefix=PREFIX, include_in_schema=False)


@router.post("/training-jobs")
async def create_training_job(request: Request, hub: Hub, body_limit: BodyLimit) -> JSONResponse:
    raw = await read_body(request, body_limit)
    body = json_object(raw)
    model = hosted(hub, str(body.get("model_id") or ""))
    kwargs, notes = _experimental_config_kwargs(body.get("experimental_config"))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            spec = resolve_train_kwargs(kwargs).spec
        except (TypeError, ValueError) as e:
            raise api_error(422, f"experimental_config: {e}", param="experimental_config") from None
    notes += [str(w.message) for w in caught]
    ours = json.dumps(
        {"trajectory_groups": body.get("trajectory_groups"), "spec": spec.model_dump(mode="json")}
    )
    groups, spec, _, more = parse_training_job(ours.encode())
    job, _ = model.jobs.submit(
        groups, spec, key=None, request_sha256=hashlib.sha256(raw).hexdigest(), notes=[*notes, *more]
    )
    return JSONResponse({"id": job.id}, status_code=200)


@router.get("/training-jobs/{job_id}/events")
async def list_events(
    job_id: str, hub: Hub, after: str | None = None, limit: Annotated[int, Query(ge=1, le=10_000)] = 100
) -> dict[str, Any]:
    jobs = find_job_queue(hub, job_id)
    job = jobs.get(job_id)
    assert job is not None
    ours, _ = jobs.events_after(job_id, 0, limit=1_000_000)
    events = reference_events(ours, job.num_trajectories)
    if after is not None:
        if not after.isdigit():
            raise api_error(422, "after: an event id is required", param="after")
        events = [e for e in events if int(e["id"]) > int(after)]
    return page(events, limit)


@router.post("/sft-training-jobs")
async def create_sft_training_job(request: Request, hub: Hub, body_limit: BodyLimit) -> JSONResponse:
    body = await body_of(request, body_limit)
    hosted(hub, str(body.get("model_id") or ""))
    raise api_error(
        422,
        "training_data_url: art serve cannot read W&B artifacts; train SFT through art.RemoteBackend "
        "(model.train_sft) against this server instead",
        param="training_data_url",
    )


def reference_events(events: list[TrainingJobEvent], num_trajectories: int) -> list[dict[str, Any]]:
    """Our job events as the reference's (see `art.hub.routes.serverless`); ids are strings, ascending."""
    out: list[dict[str, Any]] = []
    started = False
    for event in events:
        base = 3 * event.id
        if event.type == "started":
            started = True
            out.append(
                {"id": str(base), "type": "training_started", "data": {"num_sequences": num_trajectories}}
            )
        elif event.type == "completed":
            if not started:
                out.append(
                    {"id": str(base), "type": "training_started", "data": {"num_sequences": num_trajectories}}
                )
            result = event.data.get("result") or {}
            out.append(
                {
                    "id": str(base + 1),
                    "type": "gradient_step",
                    "data": reference_metrics(result.get("metrics") or {}),
                }
            )
            out.append({"id": str(base + 2), "type": "training_ended", "data": {"step": result.get("step")}})
        elif event.type == "failed":
            reason = event.data.get("reason") or "unknown"
            out.append({"id": str(base + 2), "type": "training_failed", "data": {"error_message": reason}})
    return out


def _experimental_config_kwargs(config: Any) -> tuple[dict[str, Any], list[str]]:
    """`backend.train` keywords from the reference's `experimental_config`, and notes on what was left out."""
    if config is None:
        return {}, []
    if not isinstance(config, dict):
        raise api_error(
            422, "experimental_config: a JSON object or null is required", param="experimental_config"
        )
    known = set(valid_keywords())
    kwargs: dict[str, Any] = {}
    notes: list[str] = []
    for key, value in config.items():
        if value is None or key == "ppo":  # unset, or said again by loss_fn
            continue
        if key in known:
            kwargs[key] = value
        else:
            notes.append(f"experimental_config.{key} has no counterpart here and was ignored")
    return kwargs, notes
