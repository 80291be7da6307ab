"""A record made by a real short training run (tiny model, LocalBackend), for the `art ui` / `art show` tests.

Two RL steps on groups whose conversations hold a hand-written tool call and its result before the sampled
answer, with the judge's explanation in each trajectory's logs (the line RULER writes), and held-out groups
logged at steps 0 and 2 for the comparison page. Nothing is faked in what the trainer records.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import art
from art.local import LocalBackend
from art.record.step_record import JUDGE_EXPLANATION_PREFIX

PROJECT, NAME = "ui-demo", "digits"
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "lookup",
            "description": "Look a number up.",
            "parameters": {"type": "object", "properties": {"key": {"type": "string"}}},
        },
    }
]


def _context(scenario: int) -> list[dict[str, object]]:
    call = {
        "id": "call_1",
        "type": "function",
        "function": {"name": "lookup", "arguments": json.dumps({"key": f"n{scenario}"})},
    }
    return [
        {"role": "system", "content": "Reply with digits."},
        {"role": "user", "content": f"Scenario {scenario}: what number did the lookup give?"},
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "call_1", "content": str(scenario * 7)},
    ]


async def _rollout(model: art.TrainableModel, scenario: int, seed: int) -> art.Trajectory:
    messages = _context(scenario)
    response = await model.openai_client().chat.completions.create(
        model=model.get_inference_name(),
        messages=messages,
        tools=TOOLS,
        max_tokens=8,
        temperature=1.0,
        seed=seed,  # type: ignore[arg-type]
    )
    choice = response.choices[0]
    text = choice.message.content or ""
    digits = sum(ch.isdigit() for ch in text) / max(len(text), 1)
    trajectory = art.Trajectory(
        messages_and_choices=[*messages, choice], tools=TOOLS, reward=round(digits + 0.1 * (seed % 4), 3),
        metadata={"scenario_id": scenario}, metrics={"digits": digits},
    )  # fmt: skip
    trajectory.log(f"{JUDGE_EXPLANATION_PREFIX}: answered {text[:20]!r}; {digits:.0%} of it is digits")
    return trajectory


async def _groups(
    model: art.TrainableModel, step: int, n: int = 2, size: int = 4
) -> list[art.TrajectoryGroup]:
    return await art.gather_trajectory_groups(
        [
            art.TrajectoryGroup(
                _rollout(model, scenario, step * 100 + scenario * 10 + i) for i in range(size)
            )
            for scenario in range(n)
        ],
        pbar_desc=None,
    )


async def train_record(base_model: Path, base_path: Path, steps: int = 2) -> Path:
    """Train `steps` RL steps of a tiny model into `base_path`; returns the model's folder."""
    model = art.TrainableModel(
        name=NAME, project=PROJECT, base_model=str(base_model), base_path=str(base_path)
    )
    async with LocalBackend(progress=False) as backend:
        await model.register(backend)
        await model.log(await _groups(model, 0), split="val", step=0)
        for step in range(steps):
            await model.train(await _groups(model, step), config=art.TrainConfig(learning_rate=1e-2))
        await model.log(await _groups(model, steps), split="val", step=steps)
    return model.storage.root


def make_record(base_model: Path, base_path: Path, steps: int = 2) -> Path:
    return asyncio.run(train_record(base_model, base_path, steps))
