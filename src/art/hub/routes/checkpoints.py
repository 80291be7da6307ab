"""`/v1/art/.../checkpoints`: list, download (tar), delete; the rejected checkpoints, listed and purged."""

from __future__ import annotations

import asyncio
import json
import tarfile
import tempfile
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Annotated, Any

from fastapi import APIRouter, Query
from fastapi.responses import Response, StreamingResponse

from art.backends.remote_protocol import (
    API_PREFIX,
    Checkpoint,
    CheckpointList,
    DeletedCheckpoints,
    PurgedRejectedCheckpoints,
    RejectedCheckpointList,
)
from art.hub.api_errors import ERROR_RESPONSES, api_error, hosted_model
from art.hub.routes.shared import Hub

router = APIRouter(prefix=API_PREFIX, responses=ERROR_RESPONSES)


@router.get(
    "/models/{project}/{name}/checkpoints", response_model=CheckpointList, summary="A model's checkpoints"
)
async def list_checkpoints(
    project: str, name: str, hub: Hub, order: Annotated[str, Query(pattern="^(asc|desc)$")] = "asc"
) -> CheckpointList:
    service = hosted_model(hub, project, name).service
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


@router.get(
    "/models/{project}/{name}/checkpoints/{step}",
    summary="Download a checkpoint: a tar of its folder (PEFT adapter, optimizer state, manifest)",
    response_class=Response,
    responses={200: {"content": {"application/x-tar": {}}}},
)
async def download_checkpoint(project: str, name: str, step: int, hub: Hub) -> StreamingResponse:
    service = hosted_model(hub, project, name).service
    if step not in service.storage.checkpoint_steps():
        raise api_error(404, f"model {project}/{name} has no checkpoint {step} (see GET .../checkpoints)")
    folder = service.storage.checkpoint_dir(step)
    try:
        spool = await asyncio.to_thread(_tar, folder, f"{step:04d}")
    except FileNotFoundError:
        raise api_error(404, f"checkpoint {step} of {project}/{name} was deleted meanwhile") from None
    return StreamingResponse(
        _read_and_close(spool),
        media_type="application/x-tar",
        headers={"Content-Disposition": f'attachment; filename="{name}-{step:04d}.tar"'},
    )


@router.delete(
    "/models/{project}/{name}/checkpoints/{step}",
    response_model=DeletedCheckpoints,
    summary="Delete one checkpoint (not the step the model serves)",
    responses={409: {"description": "The checkpoint is the model's current step"}},
)
async def delete_checkpoint(project: str, name: str, step: int, hub: Hub) -> DeletedCheckpoints:
    service = hosted_model(hub, project, name).service
    steps = service.storage.checkpoint_steps()
    if step not in steps:
        raise api_error(404, f"model {project}/{name} has no checkpoint {step}")
    if step == service.step:
        raise api_error(409, f"checkpoint {step} is the step {project}/{name} serves; it is never deleted")
    deleted = await service.delete_checkpoints([s for s in steps if s != step])
    return DeletedCheckpoints(deleted=deleted, kept=service.storage.checkpoint_steps())


@router.get(
    "/models/{project}/{name}/rejected-checkpoints",
    response_model=RejectedCheckpointList,
    summary="The checkpoints a model set aside (failed steps, corrupted ones), oldest first",
)
async def list_rejected_checkpoints(project: str, name: str, hub: Hub) -> RejectedCheckpointList:
    service = hosted_model(hub, project, name).service
    return RejectedCheckpointList(data=await asyncio.to_thread(service.rejected_checkpoints))


@router.delete(
    "/models/{project}/{name}/rejected-checkpoints",
    response_model=PurgedRejectedCheckpoints,
    summary="Delete every checkpoint a model set aside",
)
async def purge_rejected_checkpoints(project: str, name: str, hub: Hub) -> PurgedRejectedCheckpoints:
    service = hosted_model(hub, project, name).service
    return PurgedRejectedCheckpoints(deleted=await service.purge_rejected_checkpoints())


@router.delete(
    "/models/{project}/{name}/checkpoints",
    response_model=DeletedCheckpoints,
    summary="Delete every checkpoint but `keep` and the newest",
)
async def delete_checkpoints(
    project: str, name: str, hub: Hub, keep: Annotated[list[int] | None, Query()] = None
) -> DeletedCheckpoints:
    service = hosted_model(hub, project, name).service
    deleted = await service.delete_checkpoints(keep or [])
    return DeletedCheckpoints(deleted=deleted, kept=service.storage.checkpoint_steps())


def _tar(folder: Path, arcname: str) -> Any:
    """A tar of `folder` (as `arcname`) in a spooled temporary file, at its start (the caller closes it)."""
    spool = tempfile.SpooledTemporaryFile(max_size=64 * 2**20)  # noqa: SIM115 - the response closes it
    with tarfile.open(fileobj=spool, mode="w") as tar:
        tar.add(folder, arcname=arcname)
    spool.seek(0)
    return spool


async def _read_and_close(spool: Any) -> AsyncIterator[bytes]:
    """`spool`'s bytes in 1 MiB chunks, read off the event loop; closes it at the end (or when dropped)."""
    try:
        while chunk := await asyncio.to_thread(spool.read, 1 << 20):
            yield chunk
    finally:
        spool.close()
