"""The Tinker SDK's sampling routes: sampling sessions and `asample` (a future of a protobuf
`SampleResponse`, with one sequence id per sample, as the SDK requires)."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request

from art.hub.routes.tinker.shared import JsonBody, Tinker, idempotent, required_int, required_text

router = APIRouter()


@router.post("/create_sampling_session")
async def create_sampling_session(tinker: Tinker, body: JsonBody) -> dict[str, Any]:
    session_id, seq = required_text(body, "session_id"), required_int(body, "sampling_session_seq_id")
    sampler_id = await tinker.sampling.create(session_id, seq, body.get("model_path"), body.get("base_model"))
    return {"type": "create_sampling_session", "sampling_session_id": sampler_id}


@router.get("/samplers/{sampler_id}")
async def get_sampler(sampler_id: str, tinker: Tinker) -> dict[str, Any]:
    return tinker.sampling.describe(sampler_id)


@router.post("/asample")
@idempotent
async def asample(request: Request, tinker: Tinker, body: JsonBody) -> dict[str, Any]:
    request_id, sequence_ids = tinker.sampling.sample(body)
    return {"request_id": request_id, "sample_sequence_ids": sequence_ids}
