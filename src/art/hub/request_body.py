"""Request bodies of `art serve`'s training APIs, read and checked before anything is queued.

`read_body` reads with the size limit applied while reading (413 before and after decompression, so a small
gzip bomb is refused too; 415 for an unknown content encoding), `json_object` parses, `parse_training_job`
validates a training job naming the field of the first error (422). Bodies are parsed here rather than by
FastAPI so that these limits and field names apply; `body_schema` still declares them for the OpenAPI document.
"""

from __future__ import annotations

import json
import warnings
import zlib
from typing import Any

from fastapi import Request
from pydantic import BaseModel, ValidationError

from art.backends.base import prepare_groups_for_training
from art.backends.remote_protocol import TrainingJobCreate
from art.hub.api_errors import api_error, validation_error
from art.rollout.training_input import TrainingInputError
from art.trajectories import Trajectory, TrajectoryGroup
from art.types import TrainSpec


async def read_body(request: Request, limit: int) -> bytes:
    """The request body, decompressed when `Content-Encoding: gzip`; 413 past `limit` bytes either way."""
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise api_error(413, f"the body is {int(declared)} bytes; this server accepts at most {limit}")
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise api_error(413, f"the body is over {limit} bytes, the most this server accepts")
        chunks.append(chunk)
    body = b"".join(chunks)
    encoding = request.headers.get("content-encoding", "identity").strip().lower()
    if encoding in ("", "identity"):
        return body
    if encoding != "gzip":
        raise api_error(415, f"Content-Encoding {encoding!r} is not supported; send gzip or nothing")
    out, rest = bytearray(), body
    while rest:  # a gzip stream may hold several members
        inflater = zlib.decompressobj(16 + zlib.MAX_WBITS)
        try:
            out += inflater.decompress(rest, limit + 1 - len(out))
        except zlib.error as e:
            raise api_error(422, f"the body is not valid gzip: {e}", param="body") from None
        if len(out) > limit or inflater.unconsumed_tail:
            raise api_error(413, f"the decompressed body is over {limit} bytes, the most this server accepts")
        if not inflater.eof:
            raise api_error(422, "the gzip body is truncated", param="body")
        rest = inflater.unused_data
    return bytes(out)


def json_object(raw: bytes) -> dict[str, Any]:
    try:
        value = json.loads(raw)
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise api_error(422, f"the body is not valid JSON: {e}", param="body") from None
    except RecursionError:
        raise api_error(422, "the body is JSON nested too deeply to read", param="body") from None
    if not isinstance(value, dict):
        raise api_error(422, f"the body must be a JSON object, not {type(value).__name__}", param="body")
    return value


def parse_training_job(raw: bytes) -> tuple[list[TrajectoryGroup], TrainSpec, int | None, list[str]]:
    """Validate a training job body: (groups, spec, base_step, warnings); 422 naming the field otherwise.

    The groups pass the same checks `LocalBackend.train` makes (`prepare_groups_for_training`); its
    warnings (e.g. a group with nothing trainable) come back as strings for the job's `queued` event."""
    body = json_object(raw)
    unknown = sorted(set(body) - set(TrainingJobCreate.model_fields))
    if unknown:
        raise api_error(
            422,
            f"unknown field(s) {', '.join(map(repr, unknown))}; known: {', '.join(TrainingJobCreate.model_fields)}",
            param=unknown[0],
        )
    raw_groups = body.get("trajectory_groups")
    if not isinstance(raw_groups, list):
        raise api_error(
            422, "trajectory_groups: a list of trajectory groups is required", param="trajectory_groups"
        )
    groups = []
    for i, raw_group in enumerate(raw_groups):
        where = f"trajectory_groups[{i}]"
        if not isinstance(raw_group, dict):
            raise api_error(422, f"{where}: a trajectory group (JSON object) is required", param=where)
        raw_trajectories = raw_group.get("trajectories")
        if not isinstance(raw_trajectories, list):
            raise api_error(
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
                raise validation_error(e, f"{where}.trajectories[{j}]") from None
        try:
            groups.append(TrajectoryGroup.model_validate({**raw_group, "trajectories": trajectories}))
        except ValidationError as e:
            raise validation_error(e, where) from None
        except (TypeError, ValueError) as e:
            raise api_error(422, f"{where}: {e}", param=where) from None
    try:
        spec = TrainSpec.model_validate(body.get("spec") or {})
    except ValidationError as e:
        raise validation_error(e, "spec") from None
    base_step = body.get("base_step")
    if base_step is not None and (
        not isinstance(base_step, int) or isinstance(base_step, bool) or base_step < 0
    ):
        raise api_error(422, "base_step: a step number (integer >= 0) or null is required", param="base_step")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            groups = prepare_groups_for_training(
                groups, without_logprobs=spec.allow_training_without_logprobs
            )
        except TrainingInputError as e:
            raise api_error(422, str(e), param=e.field) from None
        except (TypeError, ValueError) as e:
            raise api_error(422, f"trajectory_groups: {e}", param="trajectory_groups") from None
    return groups, spec, base_step, [str(w.message) for w in caught]


def body_schema(model: type[BaseModel]) -> dict[str, Any]:
    """`openapi_extra` declaring a body this module parses itself (`openapi_document` adds the schema)."""
    ref = {"$ref": f"#/components/schemas/{model.__name__}"}
    return {"requestBody": {"required": True, "content": {"application/json": {"schema": ref}}}}
