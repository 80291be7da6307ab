"""The reference's serverless training API, spoken by `art serve`, so its own client drives this server.

OpenPipe's ART trains hosted models through `ServerlessBackend(api_key=..., base_url=...)`, a client of W&B's
training API (`art.serverless.client` in the reference). Pointed at `art serve` (`base_url="http://host:7999/v1"`,
`api_key` = the server's key), that client works here unchanged: these routes, under `/v1/preview/`, map its
calls onto the same hub, jobs and checkpoints as our own `/v1/art/` API (`art.hub.api`), which stays as
it is.

- `POST /preview/models` {entity, project, name, base_model, return_existing}: serve the model (or find it);
  answers {id, entity, project, name, base_model, run_id}. The id is `"{project}:{name}"`; the entity is
  the one asked for (a W&B entity has no meaning here; "local" when none).
- `GET /preview/models/{id}/checkpoints?after=&limit=&order=`: a cursor page of {id, step, metrics}.
- `DELETE /preview/models/{id}/checkpoints` {steps}: {deleted_count, not_found_steps}; the step the model
  serves is never deleted (409).
- `POST /preview/models/{id}/log` {trajectory_groups, split}: the groups go to the model's record on the
  server, at its current step.
- `POST /preview/training-jobs` {model_id, trajectory_groups, experimental_config}: one training step,
  queued as a job of ours; the config's fields are `backend.train` keywords (`art.backends.train_options`:
  implemented, or accepted with no effect).
- `GET /preview/training-jobs/{id}/events?after=&limit=`: the job's events as the reference names them:
  `training_started` {num_sequences}, one `gradient_step` with the step's metrics (numbers only, the
  reference's names where it has them), then `training_ended`, or `training_failed` {error_message}.
- Chats: the reference names a served model `wandb-artifact:///{entity}/{project}/{name}` (the newest step)
  or `...:step{N}`; the OpenAI-compatible routes resolve both to `name` / `name@N`.

Not here: deleting a model (`DELETE /preview/models/{id}`: its record stays; 409 says so) and SFT jobs
(`POST /preview/sft-training-jobs` takes a W&B artifact URL this server cannot read: 422 says so; use
`RemoteBackend.train_sft`). Errors have OpenAI's shape, as everywhere on this server.
"""

from __future__ import annotations

import hashlib
import json
import re
import warnings
from typing import Annotated, Any

from fastapi import APIRouter, Query, Request
from fastapi.responses import JSONResponse, Response
from pydantic import ValidationError

from art.backends.remote_protocol import DEFAULT_MAX_BODY_BYTES, ModelCreate, TrainingJobEvent
from art.backends.train_options import resolve_train_kwargs, valid_keywords
from art.hub.api_errors import api_error, find_job_queue, hub_error
from art.hub.models import HostedModel, HubError, ServiceHub
from art.hub.request_body import json_object, parse_training_job, read_body
from art.metrics.taxonomy import TRAINER_METRIC_NAMES
from art.record.storage import validate_name
from art.trajectories import TrajectoryGroup

PREFIX = "/v1/preview"
DEFAULT_ENTITY = "local"
_ARTIFACT = re.compile(
    r"^wandb-artifact:///(?P<entity>[^/]+)/(?P<project>[^/]+)/(?P<name>[^/:]+)(?::(?P<tag>[^/]+))?$"
)


def serverless_model_id(project: str, name: str) -> str:
    """The reference client's model id for a served model: "project:name"."""
    return f"{project}:{name}"


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


def _metrics(values: dict[str, Any]) -> dict[str, float]:
    """A step's metrics as the reference's client takes them: numbers only (it sends each to `float`), those
    with a name in its taxonomy (`loss/train`, `data/step_trainer_tokens`, `time/step_trainer_s`, ...)."""
    out: dict[str, float] = {}
    for key, value in values.items():
        name = TRAINER_METRIC_NAMES.get(key, key)
        if "/" in name and isinstance(value, int | float) and not isinstance(value, bool):
            out[name] = float(value)
    return out


def reference_events(events: list[TrainingJobEvent], num_trajectories: int) -> list[dict[str, Any]]:
    """Our job events as the reference's (see the module docstring); ids are strings, ascending."""
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
                {"id": str(base + 1), "type": "gradient_step", "data": _metrics(result.get("metrics") or {})}
            )
            out.append({"id": str(base + 2), "type": "training_ended", "data": {"step": result.get("step")}})
        elif event.type == "failed":
            reason = event.data.get("reason") or "unknown"
            out.append({"id": str(base + 2), "type": "training_failed", "data": {"error_message": reason}})
    return out


def _page(items: list[dict[str, Any]], limit: int) -> dict[str, Any]:
    return {"object": "list", "data": items[:limit], "has_more": len(items) > limit}


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


def create_serverless_api(hub: ServiceHub, *, max_body_bytes: int = DEFAULT_MAX_BODY_BYTES) -> APIRouter:
    """The `/v1/preview/` router over `hub` (include it in `art serve`'s app); also teaches the hub's router
    the reference's model names (`artifact_name_resolver`)."""
    api = APIRouter(prefix=PREFIX, include_in_schema=False)
    hub.router.add_alias(artifact_name_resolver(hub))

    def hosted(model_id: str) -> HostedModel:
        project, colon, name = model_id.partition(":")
        if not colon:
            raise api_error(404, f"no model {model_id!r} on this server (model ids look like 'project:name')")
        try:
            return hub.get(project, name)
        except HubError as e:
            raise hub_error(e) from None

    async def body_of(request: Request) -> dict[str, Any]:
        return json_object(await read_body(request, max_body_bytes))

    def groups_of(raw: Any, where: str = "trajectory_groups") -> list[TrajectoryGroup]:
        if not isinstance(raw, list):
            raise api_error(422, f"{where}: a list of trajectory groups is required", param=where)
        groups = []
        for i, group in enumerate(raw):
            try:
                groups.append(TrajectoryGroup.model_validate(group))
            except (ValidationError, TypeError, ValueError) as e:
                raise api_error(
                    422, f"{where}[{i}]: {str(e).splitlines()[0]}", param=f"{where}[{i}]"
                ) from None
        return groups

    # ---- models ----------------------------------------------------------------------------------
    @api.post("/models")
    async def create_model(request: Request) -> JSONResponse:
        body = await body_of(request)
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
            raise api_error(
                409, f"model {spec.project}/{spec.name} exists; pass return_existing=true to use it"
            )
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

    @api.delete("/models/{model_id}")
    async def delete_model(model_id: str) -> JSONResponse:
        hosted(model_id)
        raise api_error(
            409,
            f"art serve does not delete models: {model_id}'s record (checkpoints, history) stays on the "
            "server; delete its checkpoints with DELETE .../checkpoints, or its folder by hand",
        )

    @api.post("/models/{model_id}/log")
    async def log(model_id: str, request: Request) -> Response:
        model = hosted(model_id)
        body = await body_of(request)
        split = body.get("split") or "val"
        try:
            validate_name(split, "split")
        except ValueError as e:
            raise api_error(422, f"split: {e}", param="split") from None
        groups = groups_of(body.get("trajectory_groups"))
        model.service.storage.append_groups(split, model.service.step, groups)
        return Response(status_code=200, content="null", media_type="application/json")

    # ---- checkpoints -----------------------------------------------------------------------------
    @api.get("/models/{model_id}/checkpoints")
    async def list_checkpoints(
        model_id: str,
        after: str | None = None,
        limit: Annotated[int, Query(ge=1, le=1000)] = 100,
        order: Annotated[str, Query(pattern="^(asc|desc)$")] = "asc",
    ) -> dict[str, Any]:
        storage = hosted(model_id).service.storage
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
                metrics = _metrics(storage.read_checkpoint_manifest(step).get("metrics") or {})
            except (OSError, ValueError):
                metrics = {}
            items.append({"id": str(step), "step": step, "metrics": metrics})
        return _page(items, limit)

    @api.delete("/models/{model_id}/checkpoints")
    async def delete_checkpoints(model_id: str, request: Request) -> dict[str, Any]:
        service = hosted(model_id).service
        steps = (await body_of(request)).get("steps")
        if not isinstance(steps, list) or not all(
            isinstance(s, int) and not isinstance(s, bool) for s in steps
        ):
            raise api_error(422, "steps: a list of step numbers is required", param="steps")
        if service.step in steps:
            raise api_error(
                409, f"checkpoint {service.step} is the step the model serves; it is never deleted"
            )
        present = service.storage.checkpoint_steps()
        wanted = {s for s in steps if s in present}
        deleted = await service.delete_checkpoints([s for s in present if s not in wanted])
        return {"deleted_count": len(deleted), "not_found_steps": sorted(set(steps) - set(present))}

    # ---- training jobs ---------------------------------------------------------------------------
    @api.post("/training-jobs")
    async def create_training_job(request: Request) -> JSONResponse:
        raw = await read_body(request, max_body_bytes)
        body = json_object(raw)
        model = hosted(str(body.get("model_id") or ""))
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

    @api.get("/training-jobs/{job_id}/events")
    async def list_events(
        job_id: str, after: str | None = None, limit: Annotated[int, Query(ge=1, le=10_000)] = 100
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
        return _page(events, limit)

    @api.post("/sft-training-jobs")
    async def create_sft_training_job(request: Request) -> JSONResponse:
        body = await body_of(request)
        hosted(str(body.get("model_id") or ""))
        raise api_error(
            422,
            "training_data_url: art serve cannot read W&B artifacts; train SFT through art.RemoteBackend "
            "(model.train_sft) against this server instead",
            param="training_data_url",
        )

    return api
