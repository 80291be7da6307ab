"""Asynchronous RL with tool calls: a model learns a secret bit string through a forced `make_guess` call.

The reference ART's `binary_prefix_tool_pipeline` on LocalBackend: every request forces one call of
`make_guess(guess)` (`tool_choice` names the tool; ART's server constrains the call to the tool's schema,
which here caps the guess at 30 characters, so every call is complete); the reward is the length of the
prefix the guess shares with a secret 30-bit string, 0 for a guess that is not made of 0s and 1s (the
model has to learn that part, and the bits). `PipelineTrainer` keeps rollout workers sampling while steps train; validation
guesses greedily every few steps.

python examples/pipeline_binary_prefix_tool.py                  # SmolLM2-135M, embedded, on this machine
python examples/pipeline_binary_prefix_tool.py --steps 4 --base-model PATH_OR_HF_ID
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
from typing import Any

import art
from art.local import LocalBackend
from art.pipeline_trainer import PipelineTrainer, make_group_rollout_fn

TOOL_NAME = "make_guess"
SECRET_BITS = "110000110100101011111010101011"
TOOLS: list[dict[str, Any]] = [
    {
        "type": "function",
        "function": {
            "name": TOOL_NAME,
            "description": "Submit a binary guess for the secret string.",
            "parameters": {
                "type": "object",
                "properties": {
                    "guess": {
                        "type": "string",
                        "description": f"A binary string of length {len(SECRET_BITS)} of 0 and 1.",
                        "maxLength": len(SECRET_BITS),  # ours: the call always ends; the bits are learned
                    }
                },
                "required": ["guess"],
                "additionalProperties": False,
            },
        },
    }
]
TOOL_CHOICE = {"type": "function", "function": {"name": TOOL_NAME}}
SYSTEM_PROMPT = (
    f"You are playing a prefix-guessing game. Call the tool {TOOL_NAME} exactly once with your best guess: a "
    f"{len(SECRET_BITS)}-character string of only 0 and 1. Your reward is the length of the prefix your guess "
    "shares with the secret string."
)
USER_PROMPT = "Call the tool with your best binary guess."


def shared_prefix_len(guess: str, secret: str = SECRET_BITS) -> int:
    """How many leading characters `guess` and `secret` have in common."""
    matched = 0
    for guessed, actual in zip(guess, secret, strict=False):
        if guessed != actual:
            break
        matched += 1
    return matched


def is_valid_guess(guess: str | None) -> bool:
    """A non-empty string of 0s and 1s."""
    return bool(guess) and all(ch in "01" for ch in guess or "")


def score(guess: str | None) -> float:
    """The reward of a guess: its shared prefix with the secret; 0 when it is missing or not binary."""
    return float(shared_prefix_len(guess or "")) if is_valid_guess(guess) else 0.0


def extract_guess(choice: Any) -> str | None:
    """The `guess` argument of the choice's first `make_guess` call, if it has one."""
    for call in choice.message.tool_calls or []:
        if call.function.name == TOOL_NAME:
            try:
                arguments = json.loads(call.function.arguments)
            except json.JSONDecodeError:
                return None
            guess = arguments.get("guess") if isinstance(arguments, dict) else None
            return guess if isinstance(guess, str) else None
    return None


async def rollout(
    model: art.TrainableModel, scenario: dict[str, Any], config: dict[str, Any]
) -> art.Trajectory:
    """One forced guess. Inside a PipelineTrainer, `get_inference_name()` names the rollout's own step."""
    messages: art.Messages = [
        {"role": "system", "content": SYSTEM_PROMPT},
        {"role": "user", "content": USER_PROMPT},
    ]
    response = await model.openai_client().chat.completions.create(
        model=model.get_inference_name(),
        messages=messages,
        max_tokens=config["max_tokens"],
        temperature=config["temperature"],
        tools=TOOLS,  # type: ignore[arg-type]
        tool_choice=TOOL_CHOICE,  # type: ignore[arg-type]
    )
    choice = response.choices[0]
    guess = extract_guess(choice)
    metrics: dict[str, float] = {
        "prefix_len": score(guess),
        "guess_len": len(guess or ""),
        "valid_guess": float(is_valid_guess(guess)),
        "tool_call_found": float(guess is not None),
    }
    usage = response.usage
    if usage is not None:  # nothing unless a cost calculator is set (model.set_cost_calculator)
        metrics.update(model.cost_calculator(usage.prompt_tokens, usage.completion_tokens, config["context"]))
    return art.Trajectory(
        messages_and_choices=[*messages, choice], tools=TOOLS, reward=score(guess), metrics=metrics
    )


async def main(
    base_model: str = "smollm2-135m",
    steps: int = 10,
    rollouts_per_scenario: int = 8,
    base_path: str = ".art",
    eval_every: int = 2,
    max_tokens: int = 100,
) -> dict[int, float]:
    """Train for `steps` steps; returns the validation reward (the greedy guess's prefix) at each evaluated step."""
    train_config = {"temperature": 1.0, "max_tokens": max_tokens, "context": "train"}

    def scenarios() -> Any:
        for i in itertools.count():
            yield {"metadata": {"scenario_id": str(i)}}

    async def evaluate(model: art.TrainableModel, step: int, config: dict[str, Any]) -> list[art.Trajectory]:
        return [await rollout(model, {}, {**config, "temperature": 0.0, "context": "eval"})]

    model = art.TrainableModel(
        name="binary-prefix-tool", project="pipeline", base_model=base_model, base_path=base_path
    )
    async with LocalBackend() as backend:
        await model.register(backend)
        trainer = PipelineTrainer(
            model,
            backend,
            make_group_rollout_fn(rollout, n=rollouts_per_scenario),
            scenarios(),
            train_config,
            evaluate,
            num_rollout_workers=4,
            min_batch_size=2,
            max_batch_size=4,
            max_steps_off_policy=2,
            learning_rate=1e-4,
            max_steps=steps,
            eval_every_n_steps=eval_every,
        )
        await trainer.train()
    return {row["step"]: row["val/reward"] for row in model.history() if "val/reward" in row}


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base-model", default="smollm2-135m")
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--rollouts-per-scenario", type=int, default=8)
    parser.add_argument("--base-path", default=".art")
    args = parser.parse_args()
    val = asyncio.run(main(args.base_model, args.steps, args.rollouts_per_scenario, args.base_path))
    print("validation reward by step: " + ", ".join(f"{step}: {r:.1f}" for step, r in sorted(val.items())))
