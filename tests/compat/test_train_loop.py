"""The reference's current training loop, `backend.train(...)` then `model.log(...)`, for 20 steps with
no `get_step()` and no `model.train()` anywhere: every rollout must work and come from the newest step.

Before names came from the backend, `model.get_inference_name()` kept answering `name@0`: step 1's
rollouts were silently off-policy, and once step 2 was published every request failed with
`404 The model 'name@0' does not exist`.
"""

from __future__ import annotations

from pathlib import Path

import art
from art.local import LocalBackend

PROMPT = [{"role": "user", "content": "Puzzle 1. Clue 1: the person is Plum.\nA. Who did it?"}]
STEPS = 20


async def rollout(model: art.TrainableModel, index: int, expected_step: int) -> art.Trajectory:
    name = model.get_inference_name()
    response = await model.openai_client().chat.completions.create(
        model=name,
        messages=PROMPT,
        max_tokens=8,  # type: ignore[arg-type]
    )
    choice = response.choices[0]
    # the name sent is the newest step's, and that step's adapter produced the tokens
    assert name == f"loop@{expected_step}"
    assert response.model == name
    assert (choice.model_extra or {})["checkpoint_step"] == expected_step
    # rewards that always differ within a group, so that every step trains
    return art.Trajectory(messages_and_choices=[*PROMPT, choice], reward=float(index))


async def test_twenty_steps_of_backend_train_and_model_log_keep_every_rollout_on_policy(
    compat_model_path: Path, tmp_path: Path
) -> None:
    model = art.TrainableModel(name="loop", project="compat", base_model=str(compat_model_path))
    async with LocalBackend(path=str(tmp_path), progress=False) as backend:
        await model.register(backend)
        expected = 0  # the test's own count: the loop never asks the model or backend for the step
        for _ in range(STEPS):
            groups = await art.gather_trajectory_groups(
                [art.TrajectoryGroup(rollout(model, j, expected) for j in range(4))], pbar_desc=None
            )
            result = await backend.train(model, groups, learning_rate=1e-3)
            await model.log(groups, metrics=result.metrics, step=result.step, split="train")
            assert result.step == expected + 1
            expected = result.step
        assert model.get_inference_name() == f"loop@{STEPS}"
        history = model.history()
        assert [e["step"] for e in history] == list(range(1, STEPS + 1))
        assert all(e["train/exception_rate"] == 0.0 for e in history)
