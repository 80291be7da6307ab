"""The `/v1/art/` routes of `art serve`: models, training jobs and their events, checkpoints.

Shapes are in `art.backends.remote_protocol`; the work is the hub's (`art.serve.hub`) and the jobs' (`art.serve.jobs`).
Every bad request gets a 4xx in OpenAI's error shape, decided before anything is queued: 401 (the app's
key middleware), 404 unknown model, job or checkpoint, 409 conflicts, 413 bodies over the limit (before
and after decompression, so a small gzip bomb is refused too), 415 unknown content encodings, 422 for a
body that is not what the route takes, naming the field (`param`), e.g. `trajectory_groups[2].trajectories[0].reward`.
Request bodies are parsed here, not by FastAPI, so that the limits apply while reading and the errors name
fields the way the client spells them; their schemas are still declared for the OpenAPI document.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import re
import tarfile
import tempfile
import warnings
import zlib
from collections.abc import AsyncIterator
from typing import Annotated, Any

from fastapi import APIRouter, FastAPI, Header, Query, Request
from fastapi.responses import JSONResponse, Response, StreamingResponse
from pydantic import BaseModel, ValidationError
from pydantic.json_schema import models_json_schema

from art.backends.remote_protocol import (
    API_PREFIX,
    DEFAULT_MAX_BODY_BYTES,
    IDEMPOTENCY_HEADER,
    MAX_WAIT_SECONDS,
    TERMINAL_EVENTS,
    Checkpoint,
    CheckpointList,
    DeletedCheckpoints,
    ModelCreate,
    ModelInfo,
    ModelList,
    PurgedRejectedCheckpoints,
    RejectedCheckpointList,
    TrainingJob,
    TrainingJobCreate,
    TrainingJobEventPage,
)
from art.record.storage import disk_said, storage_error
from art.rollout.training_input import TrainingInputError
from art.server.errors import OpenAIError

from ..backends.base import prepare_groups_for_training
from ..trajectories import Trajectory, TrajectoryGroup
from ..types import TrainSpec
from .hub import HubError, ServiceHub
from .jobs import IdempotencyConflict, ModelJobs, is_job_id

_KEY_PATTERN = re.compile(r"^[\x21-\x7e]{1,255}$")
SSE_KEEPALIVE_SECONDS = 15.0

_ERRORS: dict[int | str, dict[str, Any]] = {
    code: {"description": text}
    for code, text in (
        (401, "Missing or wrong API key"),
        (404, "Unknown model, job or checkpoint"),
        (413, "Body over the size limit"),
        (422, "Malformed body; `error.param` names the field"),
        (507, "The server's disk refused a write; nothing was changed"),
    )
}


def _error(status: int, message: str, *, param: str | None = None, code: str | None = None) -> OpenAIError:
    kinds = {
        401: "authentication_error",
        404: "not_found_error",
        409: "conflict_error",
        413: "request_too_large",
        507: "insufficient_storage",
    }
    return OpenAIError(
        status, message, type=kinds.get(status, "invalid_request_error"), param=param, code=code
    )


def storage_refused(e: OSError, what: str) -> OpenAIError:
    """507 for a write the server's disk refused (what it said, no paths), so a client knows it is the
    server's storage, not its request; any other OSError stays a server error (500)."""
    disk = storage_error(e)
    if disk is None:
        return _error(500, f"{what}: the server could not write to its disk ({type(e).__name__})")
    return _error(
        507,
        f"{what}: the server's disk refused a write ({disk_said(disk)}). Nothing was changed; free space on "
        "the server and try again.",
        code="insufficient_storage",
    )


def _hub_error(e: HubError) -> OpenAIError:
    return _error(e.status, str(e), param=e.param)


def _loc(parts: tuple[int | str, ...] | list[int | str], prefix: str = "") -> str:
    """A pydantic location as the client spells it: `trajectory_groups[2].trajectories[0].reward`."""
    out = prefix
    for part in parts:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def _validation_error(e: ValidationError, prefix: str = "") -> OpenAIError:
    first = e.errors()[0]
    where = _loc(tuple(first["loc"]), prefix) or prefix or "body"
    more = f" (and {e.error_count() - 1} more)" if e.error_count() > 1 else ""
    return _error(422, f"{where}: {first['msg']}{more}", param=where)


async def read_body(request: Request, limit: int) -> bytes:
    """The request body, decompressed when `Content-Encoding: gzip`; 413 past `limit` bytes either way."""
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise _error(413, f"the body is {int(declared)} bytes; this server accepts at most {limit}")
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise _error(413, f"the body is over {limit} bytes, the most this server accepts")
        chunks.append(chunk)
    body = b"".join(chunks)
    encoding = request.headers.get("content-encoding", "identity").strip().lower()
    if encoding in ("", "identity"):
        return body
    if encoding != "gzip":
        raise _error(415, f"Content-Encoding {encoding!r} is not supported; send gzip or nothing")
    out, rest = bytearray(), body
    while rest:  # a gzip stream may hold several members
        inflater = zlib.decompressobj(16 + zlib.MAX_WBITS)
        try:
            out += inflater.decompress(rest, limit + 1 - len(out))
        except zlib.error as e:
            raise _error(422, f"the body is not valid gzip: {e}", param="body") from None
        if len(out) > limit or inflater.unconsumed_tail:
            raise _error(413, f"the decompressed body is over {limit} bytes, the most this server accepts")
        if not inflater.eof:
            raise _error(422, "the gzip body is truncated", param="body")
        rest = inflater.unused_data
    return bytes(out)


def _json_object(raw: bytes) -> dict[str, Any]:
    try:
        value = json.loads(raw)
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise _error(422, f"the body is not valid JSON: {e}", param="body") from None
    except RecursionError:
        raise _error(422, "the body is JSON nested too deeply to read", param="body") from None
    if not isinstance(value, dict):
        raise _error(422, f"the body must be a JSON object, not {type(value).__name__}", param="body")
    return value


def parse_training_job(raw: bytes) -> tuple[list[TrajectoryGroup], TrainSpec, int | None, list[str]]:
    """Validate a training job body: (groups, spec, base_step, warnings); 422 naming the field otherwise.

    The groups pass the same checks `LocalBackend.train` makes (`prepare_groups_for_training`); its
    warnings (e.g. a group with nothing trainable) come back as strings for the job's `queued` event."""
    body = _json_object(raw)
    unknown = sorted(set(body) - set(TrainingJobCreate.model_fields))
    if unknown:
        raise _error(
            422,
            f"unknown field(s) {', '.join(map(repr, unknown))}; known: {', '.join(TrainingJobCreate.model_fields)}",
            param=unknown[0],
        )
    raw_groups = body.get("trajectory_groups")
    if not isinstance(raw_groups, list):
        raise _error(
            422, "trajectory_groups: a list of trajectory groups is required", param="trajectory_groups"
        )
    groups = []
    for i, raw_group in enumerate(raw_groups):
        where = f"trajectory_groups[{i}]"
        if not isinstance(raw_group, dict):
            raise _error(422, f"{where}: a trajectory group (JSON object) is required", param=where)
        raw_trajectories = raw_group.get("trajectories")
        if not isinstance(raw_trajectories, list):
            raise _error(
                422,
                f"{where}.trajectories: a list of trajectories is required",
                param=f"{where}.trajectories",
            )
        trajectories = []
        for j, raw_trajectory in enumerate(raw_trajectories):
            # Validated one by one, so that an error names the trajectory (the group's own constructor
            # validates its items too, but reports them without their place).
            try:
                trajectories.append(Trajectory.model_validate(raw_trajectory))
            except ValidationError as e:
                raise _validation_error(e, f"{where}.trajectories[{j}]") from None
        try:
            groups.append(TrajectoryGroup.model_validate({**raw_group, "trajectories": trajectories}))
        except ValidationError as e:
            raise _validation_error(e, where) from None
        except (TypeError, ValueError) as e:
            raise _error(422, f"{where}: {e}", param=where) from None
    try:
        spec = TrainSpec.model_validate(body.get("spec") or {})
    except ValidationError as e:
        raise _validation_error(e, "spec") from None
    base_step = body.get("base_step")
    if base_step is not None and (
        not isinstance(base_step, int) or isinstance(base_step, bool) or base_step < 0
    ):
        raise _error(422, "base_step: a step number (integer >= 0) or null is required", param="base_step")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            groups = prepare_groups_for_training(
                groups, without_logprobs=spec.allow_training_without_logprobs
            )
        except TrainingInputError as e:
            raise _error(422, str(e), param=e.field) from None
        except (TypeError, ValueError) as e:
            raise _error(422, f"trajectory_groups: {e}", param="trajectory_groups") from None
    return groups, spec, base_step, [str(w.message) for w in caught]


def _body_schema(model: type[BaseModel]) -> dict[str, Any]:
    """`openapi_extra` declaring a body this module parses itself (`openapi_document` adds the schema)."""
    ref = {"$ref": f"#/components/schemas/{model.__name__}"}
    return {"requestBody": {"required": True, "content": {"application/json": {"schema": ref}}}}


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


def find_job_queue(hub: ServiceHub, job_id: str) -> ModelJobs:
    """The job queue that holds `job_id`, or an OpenAI-shaped 404 naming it."""
    if not is_job_id(job_id):
        raise _error(404, f"no training job {job_id!r} on this server (job ids look like job-<24 hex>)")
    try:
        return hub.find_job(job_id)
    except HubError as e:
        raise _hub_error(e) from None


def create_api(hub: ServiceHub, *, max_body_bytes: int = DEFAULT_MAX_BODY_BYTES) -> APIRouter:
    """The `/v1/art/` router over `hub`; include it in the app `create_app(hub.router, ...)` returns."""
    api = APIRouter(prefix=API_PREFIX, responses=_ERRORS)

    def hosted(project: str, name: str) -> Any:
        try:
            return hub.get(project, name)
        except HubError as e:
            raise _hub_error(e) from None

    def job_queue(job_id: str) -> ModelJobs:
        return find_job_queue(hub, job_id)

    # ---- models ----------------------------------------------------------------------------------
    @api.post(
        "/models",
        response_model=ModelInfo,
        summary="Serve a trainable model (or find it, when it is already served)",
        openapi_extra=_body_schema(ModelCreate),
        responses={409: {"description": "The name is taken by another model"}},
    )
    async def create_model(request: Request) -> JSONResponse:
        try:
            spec = ModelCreate.model_validate(_json_object(await read_body(request, max_body_bytes)))
        except ValidationError as e:
            raise _validation_error(e) from None
        try:
            model, created = await hub.create(spec)
        except HubError as e:
            raise _hub_error(e) from None
        return JSONResponse(model.info().model_dump(mode="json"), status_code=201 if created else 200)

    @api.get("/models", response_model=ModelList, summary="The models this server serves")
    async def list_models() -> ModelList:
        return ModelList(data=[m.info() for m in hub.models.values()])

    @api.get("/models/{project}/{name}", response_model=ModelInfo, summary="One served model and its step")
    async def get_model(project: str, name: str) -> ModelInfo:
        info: ModelInfo = hosted(project, name).info()
        return info

    # ---- training jobs ---------------------------------------------------------------------------
    @api.post(
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
        openapi_extra=_body_schema(TrainingJobCreate),
        responses={200: {"description": "An existing job, found by its idempotency key"}},
    )
    async def create_training_job(
        project: str,
        name: str,
        request: Request,
        idempotency_key: Annotated[str | None, Header(alias=IDEMPOTENCY_HEADER)] = None,
    ) -> JSONResponse:
        model = hosted(project, name)
        if idempotency_key is not None and not _KEY_PATTERN.match(idempotency_key):
            raise _error(
                422, f"{IDEMPOTENCY_HEADER}: 1 to 255 printable ASCII characters", param=IDEMPOTENCY_HEADER
            )
        raw = await read_body(request, max_body_bytes)
        groups, spec, base_step, notes = await asyncio.to_thread(parse_training_job, raw)
        try:  # token ids within this model's vocabulary: refused now, not in the middle of the step
            await asyncio.to_thread(model.service.check_training_input, groups)
        except TrainingInputError as e:
            raise _error(422, str(e), param=e.field) from None
        sha = hashlib.sha256(raw).hexdigest()
        try:
            job, created = model.jobs.submit(
                groups, spec, key=idempotency_key, request_sha256=sha, base_step=base_step, notes=notes
            )
        except IdempotencyConflict as e:
            raise _error(409, str(e), param=IDEMPOTENCY_HEADER) from None
        except OSError as e:
            raise storage_refused(e, "the training job was not queued") from None
        return JSONResponse(job.model_dump(mode="json"), status_code=202 if created else 200)

    @api.get(
        "/models/{project}/{name}/training-jobs",
        response_model=list[TrainingJob],
        summary="A model's newest training jobs, newest first",
    )
    async def list_training_jobs(
        project: str, name: str, limit: Annotated[int, Query(ge=1, le=1000)] = 20
    ) -> list[TrainingJob]:
        jobs: list[TrainingJob] = hosted(project, name).jobs.recent(limit)
        return jobs

    @api.get("/training-jobs/{job_id}", response_model=TrainingJob, summary="A training job")
    async def get_training_job(job_id: str) -> TrainingJob:
        job = job_queue(job_id).get(job_id)
        assert job is not None
        return job

    @api.get(
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
        after: Annotated[int, Query(ge=0)] = 0,
        limit: Annotated[int, Query(ge=1, le=10_000)] = 100,
        wait: Annotated[float, Query(ge=0, le=MAX_WAIT_SECONDS)] = 0.0,
    ) -> TrainingJobEventPage:
        jobs = job_queue(job_id)
        job = jobs.get(job_id)
        if (
            wait > 0 and job is not None and job.status in ("queued", "running")
        ):  # a finished job has all its events
            await jobs.wait_for_event(job_id, after, wait)
        events, has_more = jobs.events_after(job_id, after, limit)
        job = jobs.get(job_id)
        assert job is not None
        return TrainingJobEventPage(data=events, has_more=has_more, job=job)

    @api.get(
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
        after: Annotated[int, Query(ge=0)] = 0,
        last_event_id: Annotated[str | None, Header(alias="Last-Event-ID")] = None,
    ) -> StreamingResponse:
        jobs = job_queue(job_id)
        cursor = after
        if last_event_id is not None:
            if not last_event_id.strip().isdigit():
                raise _error(422, "Last-Event-ID: an event id (integer) is required", param="Last-Event-ID")
            cursor = max(cursor, int(last_event_id))

        async def events(cursor: int) -> AsyncIterator[str]:
            while True:
                page, _ = jobs.events_after(job_id, cursor, limit=1000)
                for event in page:
                    yield f"id: {event.id}\nevent: {event.type}\ndata: {event.model_dump_json()}\n\n"
                    cursor = event.id
                    if event.type in TERMINAL_EVENTS:
                        return
                if not page and not await jobs.wait_for_event(job_id, cursor, SSE_KEEPALIVE_SECONDS):
                    yield ": keep-alive\n\n"

        return StreamingResponse(
            events(cursor), media_type="text/event-stream", headers={"Cache-Control": "no-cache"}
        )

    # ---- checkpoints -----------------------------------------------------------------------------
    @api.get(
        "/models/{project}/{name}/checkpoints", response_model=CheckpointList, summary="A model's checkpoints"
    )
    async def list_checkpoints(
        project: str, name: str, order: Annotated[str, Query(pattern="^(asc|desc)$")] = "asc"
    ) -> CheckpointList:
        service = hosted(project, name).service
        loaded = set(service.engine.model_names()) if service.engine is not None else set()
        data = []
        for step in service.storage.checkpoint_steps():
            manifest = service.storage.checkpoint_dir(step) / "art_checkpoint.json"
            try:
                saved_at = json.loads(manifest.read_text(encoding="utf-8")).get("saved_at")
            except (OSError, ValueError):
                saved_at = None
            data.append(
                Checkpoint(
                    step=step,
                    saved_at=saved_at,
                    current=step == service.step,
                    loaded=service.served_name(step) in loaded,
                )
            )
        return CheckpointList(data=data if order == "asc" else data[::-1])

    @api.get(
        "/models/{project}/{name}/checkpoints/{step}",
        summary="Download a checkpoint: a tar of its folder (PEFT adapter, optimizer state, manifest)",
        response_class=Response,
        responses={200: {"content": {"application/x-tar": {}}}},
    )
    async def download_checkpoint(project: str, name: str, step: int) -> StreamingResponse:
        service = hosted(project, name).service
        if step not in service.storage.checkpoint_steps():
            raise _error(404, f"model {project}/{name} has no checkpoint {step} (see GET .../checkpoints)")
        folder = service.storage.checkpoint_dir(step)

        def pack() -> Any:
            spool = tempfile.SpooledTemporaryFile(max_size=64 * 2**20)  # noqa: SIM115 - the response closes it
            with tarfile.open(fileobj=spool, mode="w") as tar:
                tar.add(folder, arcname=f"{step:04d}")
            spool.seek(0)
            return spool

        try:
            spool = await asyncio.to_thread(pack)
        except FileNotFoundError:
            raise _error(404, f"checkpoint {step} of {project}/{name} was deleted meanwhile") from None

        async def chunks() -> AsyncIterator[bytes]:
            try:
                while chunk := await asyncio.to_thread(spool.read, 1 << 20):
                    yield chunk
            finally:
                spool.close()

        return StreamingResponse(
            chunks(),
            media_type="application/x-tar",
            headers={"Content-Disposition": f'attachment; filename="{name}-{step:04d}.tar"'},
        )

    @api.delete(
        "/models/{project}/{name}/checkpoints/{step}",
        response_model=DeletedCheckpoints,
        summary="Delete one checkpoint (not the step the model serves)",
        responses={409: {"description": "The checkpoint is the model's current step"}},
    )
    async def delete_checkpoint(project: str, name: str, step: int) -> DeletedCheckpoints:
        service = hosted(project, name).service
        steps = service.storage.checkpoint_steps()
        if step not in steps:
            raise _error(404, f"model {project}/{name} has no checkpoint {step}")
        if step == service.step:
            raise _error(409, f"checkpoint {step} is the step {project}/{name} serves; it is never deleted")
        deleted = await service.delete_checkpoints([s for s in steps if s != step])
        return DeletedCheckpoints(deleted=deleted, kept=service.storage.checkpoint_steps())

    @api.get(
        "/models/{project}/{name}/rejected-checkpoints",
        response_model=RejectedCheckpointList,
        summary="The checkpoints a model set aside (failed steps, corrupted ones), oldest first",
    )
    async def list_rejected_checkpoints(project: str, name: str) -> RejectedCheckpointList:
        service = hosted(project, name).service
        return RejectedCheckpointList(data=await asyncio.to_thread(service.rejected_checkpoints))

    @api.delete(
        "/models/{project}/{name}/rejected-checkpoints",
        response_model=PurgedRejectedCheckpoints,
        summary="Delete every checkpoint a model set aside",
    )
    async def purge_rejected_checkpoints(project: str, name: str) -> PurgedRejectedCheckpoints:
        service = hosted(project, name).service
        return PurgedRejectedCheckpoints(deleted=await service.purge_rejected_checkpoints())

    @api.delete(
        "/models/{project}/{name}/checkpoints",
        response_model=DeletedCheckpoints,
        summary="Delete every checkpoint but `keep` and the newest",
    )
    async def delete_checkpoints(
        project: str, name: str, keep: Annotated[list[int] | None, Query()] = None
    ) -> DeletedCheckpoints:
        service = hosted(project, name).service
        deleted = await service.delete_checkpoints(keep or [])
        return DeletedCheckpoints(deleted=deleted, kept=service.storage.checkpoint_steps())

    return api
