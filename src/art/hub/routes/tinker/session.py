"""The Tinker SDK's start-up and bookkeeping routes: client config, sessions, heartbeats, telemetry.

The client config turns off what this server does not do (JWT exchange, server-side custom losses, the
batched futures route) and asks for forward_backward chunks in order, uncompressed.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter

from art.hub.routes.tinker.shared import OptionalJsonBody, Tinker

router = APIRouter()

CLIENT_CONFIG = {
    "pjwt_auth_enabled": False,
    "parallel_fwdbwd_chunks": False,
    "proto_compress_fwdbwd": False,
    "sample_use_retrieve_futures": False,
    "custom_loss_server_side": False,
    "sample_join_sampling_session": False,
}


@router.post("/client/config")
async def client_config(_: Tinker) -> dict[str, Any]:
    return CLIENT_CONFIG


@router.post("/client/dynamic_config")
async def dynamic_config(_: Tinker) -> dict[str, Any]:
    return {}


@router.get("/healthz")
async def healthz(_: Tinker) -> dict[str, Any]:
    return {"status": "ok"}


@router.post("/create_session")
async def create_session(tinker: Tinker, body: OptionalJsonBody = None) -> dict[str, Any]:
    session_id = tinker.training.create_session((body or {}).get("user_metadata"))
    return {"type": "create_session", "session_id": session_id}


@router.post("/session_heartbeat")
async def heartbeat(tinker: Tinker, body: OptionalJsonBody = None) -> dict[str, Any]:
    tinker.training.session(str((body or {}).get("session_id")))
    return {"type": "session_heartbeat"}


@router.post("/telemetry")
async def telemetry(_: Tinker) -> dict[str, Any]:
    return {"status": "accepted"}  # nothing is kept


@router.post("/sessions/{session_id}/finish")
async def finish(session_id: str, _: Tinker) -> dict[str, Any]:
    return {"type": "finish", "session_id": session_id}


@router.get("/sessions/{session_id}")
async def get_session(session_id: str, tinker: Tinker) -> dict[str, Any]:
    session = tinker.training.session(session_id)
    return {"training_run_ids": session.model_ids, "sampler_ids": session.sampler_ids,
            "user_metadata": session.user_metadata}  # fmt: skip
