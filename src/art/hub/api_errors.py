"""The 4xx answers of `art serve`'s training APIs, in OpenAI's error shape, and the lookups that give them.

`api_error` makes one (status -> OpenAI error type), `validation_error` turns pydantic's first error into a
422 naming the field as the client spells it (`trajectory_groups[2].trajectories[0].reward`),
`storage_refused` a 507 for a write the server's disk refused, and `hosted_model` / `find_job_queue` the
404s for an unknown model or job. Both the `/v1/art/` routes (`art.hub.routes`) and the reference's
serverless routes (`art.hub.routes.serverless`) answer with these.
"""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError

from art.hub.jobs import ModelJobs, is_job_id
from art.hub.models import HostedModel, HubError, ServiceHub
from art.openai_server.errors import OpenAIError
from art.record.storage import disk_said, storage_error

ERROR_RESPONSES: dict[int | str, dict[str, Any]] = {
    code: {"description": text}
    for code, text in (
        (401, "Missing or wrong API key"),
        (404, "Unknown model, job or checkpoint"),
        (413, "Body over the size limit"),
        (422, "Malformed body; `error.param` names the field"),
        (507, "The server's disk refused a write; nothing was changed"),
    )
}


def api_error(status: int, message: str, *, param: str | None = None, code: str | None = None) -> OpenAIError:
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
        return api_error(500, f"{what}: the server could not write to its disk ({type(e).__name__})")
    return api_error(
        507,
        f"{what}: the server's disk refused a write ({disk_said(disk)}). Nothing was changed; free space on "
        "the server and try again.",
        code="insufficient_storage",
    )


def hub_error(e: HubError) -> OpenAIError:
    return api_error(e.status, str(e), param=e.param)


def _loc(parts: tuple[int | str, ...] | list[int | str], prefix: str = "") -> str:
    """A pydantic location as the client spells it: `trajectory_groups[2].trajectories[0].reward`."""
    out = prefix
    for part in parts:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def validation_error(e: ValidationError, prefix: str = "") -> OpenAIError:
    first = e.errors()[0]
    where = _loc(tuple(first["loc"]), prefix) or prefix or "body"
    more = f" (and {e.error_count() - 1} more)" if e.error_count() > 1 else ""
    return api_error(422, f"{where}: {first['msg']}{more}", param=where)


def find_job_queue(hub: ServiceHub, job_id: str) -> ModelJobs:
    """The job queue that holds `job_id`, or an OpenAI-shaped 404 naming it."""
    if not is_job_id(job_id):
        raise api_error(404, f"no training job {job_id!r} on this server (job ids look like job-<24 hex>)")
    try:
        return hub.find_job(job_id)
    except HubError as e:
        raise hub_error(e) from None


def hosted_model(hub: ServiceHub, project: str, name: str) -> HostedModel:
    """The model `hub` serves as `project/name`, or the hub's 404 naming it."""
    try:
        return hub.get(project, name)
    except HubError as e:
        raise hub_error(e) from None
