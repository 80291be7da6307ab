"""Shared by the scale-out tests (trainer ranks, Ray): seeded rollouts through the real server, and
comparing checkpoints' adapters."""

from __future__ import annotations

from pathlib import Path

import art
from art.types import RuntimeOptions

# The lifecycle is under test, not the speed-ups: no compiled kernels (seconds of CPU in every process).
FAST = RuntimeOptions(dtype="float32", train_compile=False, engine_compile="off")
PROMPT = [{"role": "user", "content": "Reply with digits."}]


def make_model(base_path: Path, base_model: Path, name: str = "scale") -> art.TrainableModel:
    return art.TrainableModel(
        name=name, project="scale", base_model=str(base_model), base_path=str(base_path)
    )


async def rollout(model: art.TrainableModel, seed: int, reward: float, max_tokens: int = 8) -> art.Trajectory:
    """One seeded completion of `max_tokens` tokens (end-of-turn ignored: every rollout is as long)."""
    response = await model.openai_client().chat.completions.create(
        model=model.get_inference_name(),
        messages=PROMPT,  # type: ignore[arg-type]
        max_tokens=max_tokens,
        temperature=1.0,
        seed=seed,  # type: ignore[arg-type]
        extra_body={"ignore_eos": True},
    )
    return art.Trajectory(messages_and_choices=[*PROMPT, response.choices[0]], reward=reward)


async def play(
    model: art.TrainableModel, step: int, groups: int = 2, size: int = 4
) -> list[art.TrajectoryGroup]:
    """Rollouts for one step, seeded by the step; every group has something to learn (rewards differ)."""
    return await art.gather_trajectory_groups(
        [
            art.TrajectoryGroup(
                rollout(model, seed=step * 1000 + g * 100 + i, reward=float(i % 2)) for i in range(size)
            )
            for g in range(groups)
        ],
        pbar_desc=None,
    )


def adapter(model: art.TrainableModel, step: int) -> dict[str, object]:
    """Checkpoint `step`'s adapter weights and optimizer moments, by name."""
    from safetensors.torch import load_file

    folder = model.storage.checkpoint_dir(step)
    return {
        **load_file(str(folder / "adapter_model.safetensors")),
        **load_file(str(folder / "optimizer.safetensors")),
    }
