"""The Tinker SDK's `RestClient` routes: server capabilities, training runs and their checkpoints."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Response

from art.hub.routes.tinker.shared import JsonBody, Tinker, required_text
from art.hub.tinker.ids import TinkerPath
from art.hub.tinker.training import checkpoint_json, run_json

router = APIRouter()


@router.get("/get_server_capabilities")
async def capabilities(tinker: Tinker) -> dict[str, Any]:
    """The base models served here: those of hosted models and `--tinker-model` names (trainable), and chat
    models (sample only)."""
    models: dict[str, dict[str, Any]] = {}
    for hosted in tinker.hub.models.values():
        engine = hosted.service.engine
        context = engine.max_model_len if engine is not None else None
        models[hosted.spec.base_model] = {"model_name": hosted.spec.base_model, "max_context_length": context,
                                          "trainable": True, "sampleable": True}  # fmt: skip
    for name, engine in tinker.hub.chat_models.items():
        models.setdefault(name, {"model_name": name, "max_context_length": engine.max_model_len,
                                 "trainable": False, "sampleable": True})  # fmt: skip
    for name in tinker.aliases:  # art serve --tinker-model NAME=...: trainable under that name
        models.setdefault(name, {"model_name": name, "trainable": True, "sampleable": True})
    return {"supported_models": list(models.values())}


def _page(items: list[dict[str, Any]], limit: int, offset: int) -> dict[str, Any]:
    return {"offset": offset, "limit": limit, "total_count": len(items)}


@router.get("/training_runs")
async def training_runs(tinker: Tinker, limit: int = 20, offset: int = 0) -> dict[str, Any]:
    runs = [run_json(m) for m in await tinker.training.all_models()]
    return {"training_runs": runs[offset : offset + limit], "cursor": _page(runs, limit, offset)}


@router.get("/training_runs/{model_id}")
async def training_run(model_id: str, tinker: Tinker) -> dict[str, Any]:
    return run_json(await tinker.training.model(model_id))


@router.get("/training_runs/{model_id}/checkpoints")
async def run_checkpoints(model_id: str, tinker: Tinker) -> dict[str, Any]:
    model = await tinker.training.model(model_id)
    items = [checkpoint_json(model, cid, entry) for cid, entry in model.meta["checkpoints"].items()]
    return {"checkpoints": items, "cursor": None}


@router.get("/checkpoints")
async def user_checkpoints(tinker: Tinker, limit: int = 100, offset: int = 0) -> dict[str, Any]:
    items = [
        checkpoint_json(model, cid, entry)
        for model in await tinker.training.all_models()
        for cid, entry in model.meta["checkpoints"].items()
    ]
    return {"checkpoints": items[offset : offset + limit], "cursor": _page(items, limit, offset)}


@router.delete("/training_runs/{model_id}/checkpoints/{checkpoint_id:path}")
async def delete_checkpoint(model_id: str, checkpoint_id: str, tinker: Tinker) -> Response:
    await tinker.training.delete(model_id, checkpoint_id)
    return Response(status_code=204)


@router.post("/weights_info")
async def weights_info(tinker: Tinker, body: JsonBody) -> dict[str, Any]:
    path = TinkerPath.parse(required_text(body, "tinker_path"))
    model, _ = await tinker.training.source(str(path))
    return {"base_model": model.meta["base_model"], "is_lora": True, "lora_rank": model.meta["lora_rank"]}
