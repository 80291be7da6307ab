"""The Tinker SDK's training routes: create a LoRA training model, forward/backward, optimiser step, saves
and loads. Each work route checks the request, queues the work (`art.hub.tinker.training`) and answers
its future's id at once (`{"request_id", "model_id"}`)."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request

from art.hub.routes.tinker.shared import JsonBody, Tinker, idempotent, required_int, required_text
from art.hub.tinker.ids import BadInput
from art.hub.tinker.wire import parse_forward_backward

router = APIRouter()


def _future(request_id: str, model_id: str) -> dict[str, Any]:
    return {"request_id": request_id, "model_id": model_id}


@router.post("/create_model")
@idempotent
async def create_model(request: Request, tinker: Tinker, body: JsonBody) -> dict[str, Any]:
    session_id, seq, base_model = (
        required_text(body, "session_id"),
        required_int(body, "model_seq_id"),
        required_text(body, "base_model"),
    )
    rank = int((body.get("lora_config") or {}).get("rank", 32))
    await tinker.training.check_base_model(base_model, rank)  # 400/404 before anything starts
    meta = {"user_metadata": body.get("user_metadata") or {}}
    request_id = tinker.training.create_model(session_id, seq, base_model, rank, meta)
    return _future(request_id, f"{session_id}:train:{seq}")


@router.post("/get_info")
async def get_info(tinker: Tinker, body: JsonBody) -> dict[str, Any]:
    return await tinker.training.info(required_text(body, "model_id"))


@router.post("/forward_backward")
@idempotent
async def forward_backward(request: Request, tinker: Tinker) -> dict[str, Any]:
    if request.headers.get("content-encoding", "identity") not in ("identity", ""):
        raise BadInput("send forward_backward uncompressed (this server's client config asks for it)")
    parsed = parse_forward_backward(await request.body())
    return _future(await tinker.training.forward_backward(parsed), parsed.model_id)


@router.post("/optim_step")
@idempotent
async def optim_step(request: Request, tinker: Tinker, body: JsonBody) -> dict[str, Any]:
    model_id = required_text(body, "model_id")
    if body.get("adam_params") is None:
        raise BadInput(
            "this server's optimizer is AdamW: send adam_params (other optimizer_params are refused)"
        )
    return _future(await tinker.training.optim_step(model_id, body["adam_params"]), model_id)


@router.post("/save_weights")
@idempotent
async def save_weights(request: Request, tinker: Tinker, body: JsonBody) -> dict[str, Any]:
    model_id = required_text(body, "model_id")
    overwrite = bool(body.get("overwrite", False))
    return _future(
        await tinker.training.save(model_id, required_text(body, "path"), "weights", overwrite=overwrite),
        model_id,
    )


@router.post("/save_weights_for_sampler")
@idempotent
async def save_weights_for_sampler(request: Request, tinker: Tinker, body: JsonBody) -> dict[str, Any]:
    model_id, name = required_text(body, "model_id"), body.get("path")
    if name is not None:
        return _future(await tinker.training.save(model_id, str(name), "sampler_weights"), model_id)
    seq = required_int(body, "sampling_session_seq_id")
    model = await tinker.training.model(model_id)
    session_id = model_id.split(":")[0]

    async def sampler() -> dict[str, Any]:
        step = model.hosted.service.step
        sampler_id = tinker.sampling.add_for_step(session_id, seq, model, step, None)
        return {"type": "save_weights_for_sampler", "sampling_session_id": sampler_id, "path": None}

    return _future(tinker.futures.submit(model.chain.then(sampler)), model_id)


@router.post("/load_weights")
@idempotent
async def load_weights(request: Request, tinker: Tinker, body: JsonBody) -> dict[str, Any]:
    path, optimizer = required_text(body, "path"), bool(body.get("optimizer", False))
    if body.get("model_id"):  # TrainingClient.load_state: into this model
        model_id = required_text(body, "model_id")
        return _future(await tinker.training.load_state(model_id, path, optimizer=optimizer), model_id)
    session_id, seq = required_text(body, "session_id"), required_int(body, "model_seq_id")
    request_id = await tinker.training.create_from_state(session_id, seq, path, optimizer=optimizer)
    return _future(request_id, f"{session_id}:train:{seq}")
