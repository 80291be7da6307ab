"""Inference names come from the backend, as in the reference: `name@N` for any kept step, the bare `name`
for the newest from registration on (and after a restart), older steps still on disk load on demand,
and `get_inference_name(step=...)` names a step."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import openai
import pytest

import art
from art.backends.train_options import NO_EFFECT_DEFAULTS
from art.local import LocalBackend

PROMPT = [{"role": "user", "content": "A. Who did it?"}]

# Every keyword of the reference's LocalBackend.train besides (model, trajectory_groups), at its default.
REFERENCE_TRAIN_KEYWORDS: dict[str, Any] = {
    "learning_rate": 1e-3,
    "loss_fn": "cispo",
    "loss_fn_config": None,
    "normalize_advantages": True,
    "adam_params": None,
    "kl_penalty_coef": 0.0,
    "epsilon": None,
    "epsilon_high": None,
    "scale_rewards": True,
    "importance_sampling_level": "token",
    "verbose": False,
    **NO_EFFECT_DEFAULTS,
}


async def ask(model: art.TrainableModel, name: str) -> tuple[str, int | None]:
    """(the served name, the checkpoint step) of one short completion requested as `name`."""
    response = await model.openai_client().chat.completions.create(
        model=name,
        messages=PROMPT,
        max_tokens=4,  # type: ignore[arg-type]
    )
    return response.model, (response.choices[0].model_extra or {}).get("checkpoint_step")


async def one_step(backend: LocalBackend, model: art.TrainableModel, **kwargs: Any) -> art.TrainResult:
    groups = await art.gather_trajectory_groups(
        [art.TrajectoryGroup(_rollout(model, j) for j in range(3))], pbar_desc=None
    )
    result = await backend.train(model, groups, **{"learning_rate": 1e-3, **kwargs})
    await model.log(groups, metrics=result.metrics, step=result.step, split="train")
    return result


async def _rollout(model: art.TrainableModel, j: int) -> art.Trajectory:
    response = await model.openai_client().chat.completions.create(
        model=model.get_inference_name(),
        messages=PROMPT,
        max_tokens=4,  # type: ignore[arg-type]
    )
    return art.Trajectory(messages_and_choices=[*PROMPT, response.choices[0]], reward=float(j))


async def test_names_adapters_kept_and_loaded_on_demand_and_a_restart(
    compat_model_path: Path, tmp_path: Path
) -> None:
    model = art.TrainableModel(name="n", project="compat", base_model=str(compat_model_path))
    async with LocalBackend(path=str(tmp_path), max_loaded_adapters=2, progress=False) as backend:
        await model.register(backend)
        assert model.base_path == str(tmp_path)  # the record lives where the backend says
        assert model.get_inference_name() == "n@0"
        assert model.inference_model_name == "n@0"  # set by register, as the reference's
        assert model.get_inference_name(step=5) == "n@5"
        assert await ask(model, "n") == ("n@0", 0)  # the bare name exists from registration on

        result = await one_step(backend, model, **REFERENCE_TRAIN_KEYWORDS)  # every reference keyword
        assert result.step == 1 and result.checkpoint_path == str(model.storage.checkpoint_dir(1))
        for _ in range(2):
            await one_step(backend, model)
        assert model.get_inference_name() == "n@3"
        assert await ask(model, "n") == ("n@3", 3)
        service = backend.service(model)
        assert service.adapters is not None and service.adapters.loaded_steps == [2, 3]

        # an older step still on disk answers (loaded again), and is listed as servable
        listed = {m.id for m in (await model.openai_client().models.list()).data}
        assert {"n", "n@0", "n@1", "n@2", "n@3"} <= listed
        assert await ask(model, "n@1") == ("n@1", 1)
        assert await ask(model, model.get_inference_name(step=0)) == ("n@0", 0)
        assert len(service.adapters.loaded_steps) == 2 and service.adapters.loaded_steps[-1] == 0
        # a step that does not exist (yet), or was deleted, is still a 404
        with pytest.raises(openai.NotFoundError, match="n@9"):
            await ask(model, "n@9")
        with pytest.warns(UserWarning, match="keeping only the latest"):
            assert await model.delete_checkpoints() == [3]
        with pytest.raises(openai.NotFoundError, match="n@1"):
            await ask(model, "n@1")
        assert await ask(model, "n") == ("n@3", 3)

    # A restart: a new backend and model object resume at the newest step, under both names.
    again = art.TrainableModel(name="n", project="compat", base_model=str(compat_model_path))
    with LocalBackend(path=str(tmp_path), progress=False) as backend:
        await again.register(backend)
        assert again.get_inference_name() == "n@3"
        assert await ask(again, "n") == ("n@3", 3)
        assert await ask(again, "n@3") == ("n@3", 3)
