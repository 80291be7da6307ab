"""`art.TinkerBackend` (the reference's name and arguments) trains and serves an ART `TrainableModel` through a
Tinker-API server, here a real `art serve` (tests/hub/conftest.py's): rollouts through `model.openai_client()`
are Tinker samples with trainable Choices, `backend.train` takes the step on the server, and the next
rollouts use it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("torch", reason="needs the `local` extra: pip install -e '.[local]'")
pytest.importorskip("tinker", reason="needs the `dev` extra (tinker==0.38): pip install -e '.[dev]'")

from helpers_serve import ServeProcess

import art

PROMPT = [{"role": "user", "content": "Say a number."}]


async def rollout(model: art.TrainableModel, seed: int) -> art.Trajectory:
    response = await model.openai_client().chat.completions.create(
        model=model.get_inference_name(),
        messages=PROMPT,  # type: ignore[arg-type]
        max_tokens=4,
        seed=seed,
        logprobs=True,
    )
    return art.Trajectory(messages_and_choices=[*PROMPT, response.choices[0]], reward=float(seed % 2))


async def test_tinker_backend_trains_through_art_serve(
    tinker_served: ServeProcess, tiny_model_path: Path, tmp_path: Path
) -> None:
    with pytest.raises(ValueError, match="TINKER_API_KEY"):
        art.TinkerBackend(tinker_api_key="")
    backend = art.TinkerBackend(
        tinker_api_key=tinker_served.key, base_url=tinker_served.url, path=str(tmp_path)
    )
    model = art.TrainableModel(name="agent", project="tinker-backend", base_model=str(tiny_model_path))
    try:
        await model.register(backend)
        assert await model.get_step() == 0 and model.get_inference_name() == "agent@0"
        groups = [art.TrajectoryGroup([await rollout(model, s) for s in range(4)])]
        choice: Any = groups[0].trajectories[0].messages_and_choices[-1]
        assert choice.logprobs is not None and len(choice.logprobs.content) >= 1
        result = await backend.train(model, groups, learning_rate=1e-3)
        assert result.step == 1 and result.metrics["loss"] == result.metrics["loss"]  # not NaN
        await model.log(groups, metrics=result.metrics, step=result.step, split="train")
        assert model.get_inference_name() == "agent@1"
        await rollout(model, 7)  # the new step serves
    finally:
        await backend.close()
    # a new backend resumes the model from the state its model.json names, at step 1
    again = art.TinkerBackend(
        tinker_api_key=tinker_served.key, base_url=tinker_served.url, path=str(tmp_path)
    )
    try:
        await model.register(again)
        assert await model.get_step() == 1 and model.get_inference_name() == "agent@1"
        await rollout(model, 3)
    finally:
        await again.close()
    # on the server: an ordinary record, its checkpoint 1 the step just taken
    records = list((tinker_served.path / "tinker" / "models").glob("*/checkpoints/0001"))
    assert records, "no checkpoint 1 on the server"
