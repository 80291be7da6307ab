"""Asynchronous RL with `PipelineTrainer`: teach a model to answer "maybe" when asked for yes, no or maybe.

Rollout workers keep sampling while steps train; each step takes the groups that are ready. The reward
prefers "maybe" (1.0) to "no" (0.75) to "yes" (0.5); anything else earns 0. Validation runs on held-out
phrasings every few steps, on that step's checkpoint.

python examples/pipeline_yes_no_maybe.py                       # SmolLM2-135M, embedded, on this machine
python examples/pipeline_yes_no_maybe.py --steps 4 --base-model PATH_OR_HF_ID
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import random
import re
from typing import Any

import art
from art.local import LocalBackend
from art.pipeline_trainer import PipelineTrainer, make_group_rollout_fn

WORDS = ("yes", "no", "maybe")
REWARDS = {"maybe": 1.0, "no": 0.75, "yes": 0.5}


def prompts() -> list[str]:
    """Every phrasing: two lead-ins, quoted or not, two or three of the words in every order."""
    out = []
    for lead, quoted, n in itertools.product(("respond with", "just answer with"), (True, False), (2, 3)):
        for words in itertools.permutations(WORDS, n):
            shown = [f"'{w}'" if quoted else w for w in words]
            out.append(f"{lead} {', '.join(shown[:-1])} or {shown[-1]}")
    return out


def reward(text: str) -> float:
    """The first word's reward (punctuation and case ignored)."""
    first = (
        re.split(r"\s+", text.strip().lower(), maxsplit=1)[0].strip(".,!?:;\"'()[]{}") if text.strip() else ""
    )
    return REWARDS.get(first, 0.0)


async def rollout(
    model: art.TrainableModel, scenario: dict[str, Any], config: dict[str, Any]
) -> art.Trajectory:
    """One answer to the scenario's prompt. Inside a PipelineTrainer the name names the rollout's own step."""
    trajectory = art.Trajectory(messages_and_choices=[{"role": "user", "content": scenario["prompt"]}])
    response = await model.openai_client().chat.completions.create(
        model=model.get_inference_name(),
        messages=trajectory.messages(),
        max_tokens=config["max_tokens"],
        temperature=1.0,
    )
    choice = response.choices[0]
    trajectory.messages_and_choices.append(choice)
    trajectory.reward = reward(choice.message.content or "")
    return trajectory


async def main(
    base_model: str = "smollm2-135m",
    steps: int = 20,
    rollouts_per_scenario: int = 8,
    base_path: str = ".art",
    eval_every: int = 5,
    seed: int = 0,
) -> dict[int, float]:
    """Train for `steps` steps; returns the mean validation reward at each evaluated step."""
    rng = random.Random(seed)
    all_prompts = prompts()
    rng.shuffle(all_prompts)
    val_prompts, train_prompts = all_prompts[:8], all_prompts[8:]
    config = {"max_tokens": 5}

    def scenarios() -> Any:  # endless: epochs of the training prompts, reshuffled each time
        for epoch in itertools.count():
            order = list(train_prompts)
            rng.shuffle(order)
            for i, prompt in enumerate(order):
                yield {
                    "prompt": prompt,
                    "metadata": {"scenario_id": prompt, "epoch": epoch, "scenario_index": i},
                }

    async def evaluate(model: art.TrainableModel, step: int, config: dict[str, Any]) -> list[art.Trajectory]:
        return list(await asyncio.gather(*(rollout(model, {"prompt": p}, config) for p in val_prompts)))

    model = art.TrainableModel(
        name="yes-no-maybe", project="pipeline", base_model=base_model, base_path=base_path
    )
    async with LocalBackend() as backend:
        await model.register(backend)
        trainer = PipelineTrainer(
            model,
            backend,
            make_group_rollout_fn(rollout, n=rollouts_per_scenario),
            scenarios(),
            config,
            evaluate,
            num_rollout_workers=4,
            min_batch_size=2,
            max_batch_size=4,
            max_steps_off_policy=1,
            learning_rate=1e-4,
            max_steps=steps,
            eval_every_n_steps=eval_every,
        )
        await trainer.train()
    return {row["step"]: row["val/reward"] for row in model.history() if "val/reward" in row}


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base-model", default="smollm2-135m")
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--rollouts-per-scenario", type=int, default=8)
    parser.add_argument("--base-path", default=".art")
    args = parser.parse_args()
    val = asyncio.run(main(args.base_model, args.steps, args.rollouts_per_scenario, args.base_path))
    print("validation reward by step: " + ", ".join(f"{step}: {r:.3f}" for step, r in sorted(val.items())))
