"""Teach a model to add small numbers with ART: rollouts, rewards, GRPO steps. The README shows this file.

python examples/quickstart.py                  # SmolLM2-135M, embedded (no download), on this machine
python examples/quickstart.py --steps 2 --base-model PATH_OR_HF_ID

Why this task: GRPO learns only from differences within a group, so the model must already succeed
sometimes. Shown two solved examples, SmolLM2-135M answers with a number every time and gets the sum of
two digits right 9% of the time at temperature 1 (31% greedy); the reward also gives credit for being
close, so every group has rollouts better than others and every step trains.
"""

import argparse
import asyncio
import random
import re

import art
from art.local import LocalBackend

SYSTEM = "Answer with the number only."
EXAMPLES = [("What is 3 + 4?", "7"), ("What is 5 + 1?", "6")]  # shown as earlier turns: the format


def score(a: int, b: int, reply: str) -> float:
    """1 for the right sum, 0.2 less per unit off (0 from 5 off, or for a reply that is not a number)."""
    answer = re.fullmatch(r"\s*(-?\d+)\s*", reply)
    return max(0.0, 1.0 - abs(int(answer.group(1)) - (a + b)) / 5) if answer else 0.0


def conversation(a: int, b: int) -> list[dict[str, str]]:
    """The system prompt, the two solved examples (earlier turns) and the question a + b."""
    messages = [{"role": "system", "content": SYSTEM}]
    for question, answer in EXAMPLES:  # plain dicts are context: only the sampled Choice below trains
        messages += [{"role": "user", "content": question}, {"role": "assistant", "content": answer}]
    return [*messages, {"role": "user", "content": f"What is {a} + {b}?"}]


async def rollout(model: art.TrainableModel, a: int, b: int) -> art.Trajectory:
    """One conversation: ask for a + b; the reward says how close the answer was."""
    trajectory = art.Trajectory(messages_and_choices=conversation(a, b), reward=0.0)
    response = await model.openai_client().chat.completions.create(
        model=model.get_inference_name(), messages=trajectory.messages(), max_tokens=8, temperature=1.0
    )
    choice = response.choices[0]
    trajectory.messages_and_choices.append(choice)  # a Choice (token ids + logprobs) is what trains
    trajectory.reward = score(a, b, choice.message.content or "")
    trajectory.metrics["correct"] = float(trajectory.reward == 1.0)
    return trajectory


async def main(base_model: str = "smollm2-135m", steps: int = 6, base_path: str = ".art") -> list[float]:
    """Train for `steps` steps; returns each step's mean reward (of its rollouts, before its update)."""
    model = art.TrainableModel(name="adder", project="quickstart", base_model=base_model, base_path=base_path)
    backend = LocalBackend()
    await model.register(backend)
    rng = random.Random(0)
    scenarios = [(rng.randint(0, 9), rng.randint(0, 9)) for _ in range(8 * steps)]
    rewards = []
    try:
        start = await model.get_step()  # a second run continues where the first stopped
        for batch in art.iterate_dataset(scenarios, groups_per_step=8, initial_step=start):
            groups = await art.gather_trajectory_groups(
                (art.TrajectoryGroup(rollout(model, a, b) for _ in range(4)) for a, b in batch.items),
                pbar_desc=f"step {batch.step + 1} rollouts",
                max_exceptions=0.1,
            )
            await model.train(groups, config=art.TrainConfig(learning_rate=2e-4))
            trajectories = [t for g in groups for t in g]
            rewards.append(sum(t.reward for t in trajectories) / len(trajectories))
            correct = sum(t.metrics["correct"] for t in trajectories) / len(trajectories)
            print(f"step {batch.step + 1}: mean reward {rewards[-1]:.2f}, right sums {correct:.0%}")
    finally:
        await backend.close()
    last = start + len(rewards)  # the newest step; the record opens in the browser or the terminal:
    print(f"record: {model.storage.root}\nsee it: art ui {base_path}  (browser)  or  "
          f"art show {base_path} --project quickstart --name adder --step {last}  (terminal)")  # fmt: skip
    return rewards


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description="Teach a model to add small numbers with ART.")
    parser.add_argument("--base-model", default="smollm2-135m")
    parser.add_argument("--steps", type=int, default=6)
    args = parser.parse_args()
    asyncio.run(main(args.base_model, args.steps))
