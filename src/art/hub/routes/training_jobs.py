"""`/v1/art/.../training-jobs`: queue a step (idempotent), list and read jobs, their events paged or streamed."""

from __future__ import annotations

import asyncio
import hashlib
import re
from collections.abc import AsyncIterator
from typing import Annotated

from fastapi import APIRouter, Header, Query, Request
from fastapi.responses import JSONResponse, StreamingResponse

from art.backends.remote_protocol import (
    API_PREFIX,
    IDEMPOTENCY_HEADER,
    MAX_WAIT_SECONDS,
    TERMINAL_EVENTS,
    TrainingJob,
    TrainingJobCreate,
    TrainingJobEventPage,
)
from art.hub.api_errors import ERROR_RESPONSES, api_error, find_job_queue, hosted_model, storage_refused
from art.hub.jobs import IdempotencyConflict, ModelJobs
from art.hub.request_body import body_schema, parse_training_job, read_body
from art.hub.routes.shared import BodyLimit, Hub
from art.rollout.training_input import TrainingInputError

_KEY_PATTERN = re.compile(r"^[\x21-\x7e]{1,255}$")
SSE_KEEPALIVE_SECONDS = 15.0

router = APIRouter(prefix=API_PREFIX, responses=ERROR_RESPONSES)


@router.post(
    "/models/{project}/{name}/training-jobs",
    response_model=TrainingJob,
    status_code=202,
    summary="Queue one training step; returns the job at once",
    description=(
        "The body is a `TrainingJobCreate`, sent with `Content-Encoding: gzip` (plain JSON is accepted "
        f"too). An `{IDEMPOTENCY_HEADER}` header makes a retried submission return the same job (200) "
        "instead of taking a second step; the same key with a different body is refused (409). Jobs of "
        "a model run one at a time in the order they were accepted."
    ),
    openapi_extra=body_schema(TrainingJobCreate),
    responses={200: {"description": "An existing job, found by its idempotency key"}},
)
async def create_training_job(
    project: str,
    name: str,
    request: Request,
    hub: Hub,
    body_limit: BodyLimit,
    idempotency_key: Annotated[str | None, Header(alias=IDEMPOTENCY_HEADER)] = None,
) -> JSONResponse:
    model = hosted_model(hub, project, name)
    if idempotency_key is not None and not _KEY_PATTERN.match(idempotency_key):
        raise api_error(
            422, f"{IDEMPOTENCY_HEADER}: 1 to 255 printable ASCII characters", param=IDEMPOTENCY_HEADER
        )
    raw = await read_body(request, body_limit)
    groups, spec, base_step, notes = await asyncio.to_thread(parse_training_job, raw)
    try:  # token ids within this model's vocabulary: refused now, not in the middle of the step
        await asyncio.to_thread(model.service.check_training_input, groups)
    except TrainingInputError as e:
        raise api_error(422, str(e), param=e.field) from None
    sha = hashlib.sha256(raw).hexdigest()
    try:
        job, created = model.jobs.submit(
            groups, spec, key=idempotency_key, request_sha256=sha, base_step=base_step, notes=notes
        )
    except IdempotencyConflict as e:
        raise api_error(409, str(e), param=IDEMPOTENCY_HEADER) from None
    except OSError as e:
        raise storage_refused(e, "the training job was not queued") from None
    return JSONResponse(job.model_dump(mode="json"), status_code=202 if created else 200)


@router.get(
    "/models/{project}/{name}/training-jobs",
    response_model=list[TrainingJob],
    summary="A model's newest training jobs, newest first",
)
async def list_training_jobs(
    project: str, name: str, hub: Hub, limit: Annotated[int, Query(ge=1, le=1000)] = 20
) -> list[TrainingJob]:
    jobs: list[TrainingJob] = hosted_model(hub, project, name).jobs.recent(limit)
    return jobs


@router.get("/training-jobs/{job_id}", response_model=TrainingJob, summary="A training job")
async def get_training_job(job_id: str, hub: Hub) -> TrainingJob:
    job = find_job_queue(hub, job_id).get(job_id)
    assert job is not None
    return job


@router.get(
    "/training-jobs/{job_id}/events",
    response_model=TrainingJobEventPage,
    summary="A page of a job's events after a cursor",
    description=(
        "Events with `id` > `after`, oldest first. With `wait` > 0 and no such event yet, the request "
        "waits up to `wait` seconds for one (long polling)."
    ),
)
async def list_events(
    job_id: str,
    hub: Hub,
    after: Annotated[int, Query(ge=0)] = 0,
    limit: Annotated[int, Query(ge=1, le=10_000)] = 100,
    wait: Annotated[float, Query(ge=0, le=MAX_WAIT_SECONDS)] = 0.0,
) -> TrainingJobEventPage:
    jobs = find_job_queue(hub, job_id)
    job = jobs.get(job_id)
    if (
        wait > 0 and job is not None and job.status in ("queued", "running")
    ):  # a finished job has all its events
        await jobs.wait_for_event(job_id, after, wait)
    events, has_more = jobs.events_after(job_id, after, limit)
    job = jobs.get(job_id)
    assert job is not None
    return TrainingJobEventPage(data=events, has_more=has_more, job=job)


@router.get(
    "/training-jobs/{job_id}/events/stream",
    summary="A job's events as server-sent events",
    description=(
        "`id:` is the event's cursor, `event:` its type, `data:` the event as JSON. Resumes after "
        "`after` or the `Last-Event-ID` header; ends after `completed` or `failed`."
    ),
    response_class=StreamingResponse,
    responses={200: {"content": {"text/event-stream": {}}}},
)
async def stream_events(
    job_id: str,
    hub: Hub,
    after: Annotated[int, Query(ge=0)] = 0,
    last_event_id: Annotated[str | None, Header(alias="Last-Event-ID")] = None,
) -> StreamingResponse:
    jobs = find_job_queue(hub, job_id)
    cursor = after
    if last_event_id is not None:
        if not last_event_id.strip().isdigit():
            raise api_error(422, "Last-Event-ID: an event id (integer) is required", param="Last-Event-ID")
        cursor = max(cursor, int(last_event_id))
    return StreamingResponse(
        _sse(jobs, job_id, cursor), media_type="text/event-stream", headers={"Cache-Control": "no-cache"}
    )


async def _sse(jobs: ModelJobs, job_id: str, cursor: int) -> AsyncIterator[str]:
    """The events of `job_id` after `cursor` as server-sent events, a keep-alive comment while none come."""
    while True:
        page, _ = jobs.events_after(job_id, cursor, limit=1000)
        for event in page:
            yield f"id: {event.id}\nevent: {event.type}\ndata: {event.model_dump_json()}\n\n"
            cursor = event.id
            if event.type in TERMINAL_EVENTS:
                return
        if not page and not await jobs.wait_for_event(job_id, cursor, SSE_KEEPALIVE_SECONDS):
            yield ": keep-alive\n\n"
