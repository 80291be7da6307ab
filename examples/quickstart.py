"""Teach a model to add small numbers with ART: rollouts, rewards, GRPO steps. The README shows this file.

python examples/quickstart.py                  # SmolLM2-135M, embedded (no download), on this machine
python examples/quickstart.py --steps 2 --base-model PATH_OR_HF_ID
"""

import argparse
import asyncio
import random

import art
from art.local import LocalBackend

SYSTEM = "Answer with the number only."


async def rollout(model: art.TrainableModel, a: int, b: int) -> art.Trajectory:
    """One conversation: ask for a + b, reward 1 for the right number, 0 otherwise."""
    trajectory = art.Trajectory(
        messages_and_choices=[
            {"role": "system", "content": SYSTEM},
            {"role": "user", "content": f"What is {a} + {b}?"},
        ],
        reward=0.0,
    )
    response = await model.openai_client().chat.completions.create(
        model=model.get_inference_name(), messages=trajectory.messages(), max_tokens=8, temperature=1.0
    )
    choice = response.choices[0]
    trajectory.messages_and_choices.append(choice)  # a Choice (token ids + logprobs) is what trains
    trajectory.reward = 1.0 if (choice.message.content or "").strip() == str(a + b) else 0.0
    return trajectory


async def main(base_model: str = "smollm2-135m", steps: int = 6, base_path: str = ".art") -> list[float]:
    """Train for `steps` steps; returns each step's mean reward."""
    model = art.TrainableModel(name="adder", project="quickstart", base_model=base_model, base_path=base_path)
    backend = LocalBackend()
    await model.register(backend)
    rng = random.Random(0)
    scenarios = [(rng.randint(0, 9), rng.randint(0, 9)) for _ in range(4 * steps)]
    rewards = []
    try:
        start = await model.get_step()  # a second run continues where the first stopped
        for batch in art.iterate_dataset(scenarios, groups_per_step=4, initial_step=start):
            groups = await art.gather_trajectory_groups(
                (art.TrajectoryGroup(rollout(model, a, b) for _ in range(8)) for a, b in batch.items),
                pbar_desc=f"step {batch.step + 1} rollouts",
                max_exceptions=0.1,
            )
            await model.train(groups, config=art.TrainConfig(learning_rate=1e-4))
            rewards.append(sum(t.reward for g in groups for t in g) / sum(len(g) for g in groups))
            print(f"step {batch.step + 1}: mean reward {rewards[-1]:.2f}")
    finally:
        await backend.close()
    return rewards


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description="Teach a model to add small numbers with ART.")
    parser.add_argument("--base-model", default="smollm2-135m")
    parser.add_argument("--steps", type=int, default=6)
    args = parser.parse_args()
    asyncio.run(main(args.base_model, args.steps))
