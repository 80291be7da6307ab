"""`autorl`: train a model for any task from a plain-English description, with no data.

    result = await art.recipes.autorl.autorl("Rewrite the user's text in formal business English",
                                     AutoRLConfig(generator="openai/gpt-4.1-mini", judge="openai/o4-mini"))

In order: check the generator and judge are configured (before loading anything); load the base model
and start its server; have the generator write `num_training_inputs + num_test_inputs` distinct inputs,
split once, with a seed, into training and held-out inputs that never overlap, and draft a system prompt
(both saved in the model's folder as `autorl.json`, and reused when the same model is trained on the same
task again); then RULER-scored GRPO (`art.recipes.ruler_loop.train_with_ruler`), validation against the base model
on the held-out inputs, history and plot. The rollout is single-turn: system prompt, input, answer.
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from art.model import Backend, Model, TrainableModel
from art.recipes.autorl.generate import check_task, generate_system_prompt, generate_training_inputs
from art.recipes.ruler_loop.endpoints import SELF, llm_spec
from art.recipes.ruler_loop.loop import RulerTrainingConfig, RulerTrainingResult, serving, train_with_ruler
from art.rewards.judge import Judge
from art.trajectories import Trajectory
from art.types import RULER_LOOP_LEARNING_RATE

STATE_FILE = "autorl.json"


class AutoRLConfig(BaseModel):
    """Everything `autorl` needs besides the task (defaults in one place; the CLI mirrors them).

    Example:
        config = AutoRLConfig(base_model="smollm2-135m", judge="openai/o4-mini", steps=4)
        result = await autorl("Fix the grammar of the user's text", config)
    """

    model_config = ConfigDict(extra="forbid")

    base_model: str = "smollm2-135m"
    name: str = "autorl"
    project: str = "autorl"
    base_path: str = ".art"
    generator: str | None = Field(
        default=None, description="LiteLLM model string, a name at generator_base_url, or 'self'."
    )
    generator_base_url: str | None = None
    generator_api_key: str | None = Field(default=None, repr=False)
    judge: str | None = Field(
        default=None, description="LiteLLM model string, a name at judge_base_url, or 'self'."
    )
    judge_base_url: str | None = None
    judge_api_key: str | None = Field(default=None, repr=False)
    num_training_inputs: int = Field(default=16, ge=1)
    num_test_inputs: int = Field(default=8, ge=1)
    steps: int = Field(default=8, ge=1, description="Training steps (the reference's max_training_steps).")
    groups_per_step: int = Field(default=2, ge=1)
    rollouts_per_group: int = Field(default=4, ge=2)
    learning_rate: float = Field(default=RULER_LOOP_LEARNING_RATE, gt=0)
    eval_every: int = Field(default=0, ge=0)
    temperature: float = Field(default=1.0, ge=0, le=2)
    max_tokens: int = Field(default=256, ge=1)
    seed: int = 0


class TaskInput(BaseModel):
    """One input of the task (the reference notebook's `TaskInput`).

    Example:
        >>> TaskInput(input_text="their going to the park").step
        0
    """

    step: int = 0
    input_text: str


@dataclass
class AutoRLResult:
    """Inputs, prompt and the training run's result (comparisons, history and plot paths).

    Example:
        result = await autorl("Fix the grammar of the user's text", AutoRLConfig(judge="openai/o4-mini"))
        print(result.system_prompt, len(result.train_inputs), result.state_path)
    """

    task: str
    system_prompt: str
    train_inputs: list[str]
    val_inputs: list[str]
    training: RulerTrainingResult[TaskInput]
    state_path: Path


def make_rollout(
    system_prompt: str, temperature: float, max_tokens: int
) -> Callable[[Model, TaskInput], Any]:
    """The single-turn AutoRL rollout: system prompt, the input, the model's answer (trainable).

    Example:
        rollout = make_rollout(system_prompt, temperature=1.0, max_tokens=256)
        trajectory = await rollout(model, TaskInput(input_text="their going to the park"))
    """

    async def rollout(model: Model, task_input: TaskInput) -> Trajectory:
        trajectory = Trajectory(
            messages_and_choices=[
                {"role": "system", "content": system_prompt},
                {"role": "user", "content": task_input.input_text},
            ],
            metadata={"input": task_input.input_text[:500]},
        )
        response = await model.openai_client().chat.completions.create(
            model=model.get_inference_name(),
            messages=trajectory.messages(),
            temperature=temperature,
            max_tokens=max_tokens,
            logprobs=True,
        )
        trajectory.messages_and_choices.append(response.choices[0])
        return trajectory

    return rollout


def split_inputs(inputs: list[str], num_test: int, seed: int) -> tuple[list[str], list[str]]:
    """(training inputs, held-out inputs): one seeded shuffle, cut once, so they never overlap.

    Example:
        >>> train, held_out = split_inputs(["a", "b", "c", "d", "e"], num_test=2, seed=0)
        >>> (len(train), len(held_out), set(train) & set(held_out))
        (3, 2, set())
    """
    order = list(inputs)
    random.Random(f"autorl-split:{seed}").shuffle(order)
    return order[num_test:], order[:num_test]


def _load_state(path: Path, task: str, config: AutoRLConfig) -> dict[str, Any] | None:
    if not path.exists():
        return None
    state = json.loads(path.read_text())
    same = (
        state.get("task") == task
        and len(state.get("train_inputs", [])) == config.num_training_inputs
        and len(state.get("val_inputs", [])) == config.num_test_inputs
    )
    return state if same else None


async def prepare_data(
    task: str, config: AutoRLConfig, generator: Judge, state_path: Path, echo: Callable[[str], None]
) -> tuple[str, list[str], list[str]]:
    """(system prompt, training inputs, held-out inputs): from `state_path` if it holds this task's, else
    generated and saved there."""
    state = _load_state(state_path, task, config)
    if state is not None:
        echo(f"reusing the inputs and system prompt in {state_path}")
        return state["system_prompt"], list(state["train_inputs"]), list(state["val_inputs"])
    total = config.num_training_inputs + config.num_test_inputs
    echo(f"asking {generator.label} for {total} inputs and a system prompt...")
    inputs = await generate_training_inputs(task, total, generator=generator)
    system_prompt = await generate_system_prompt(task, generator=generator)
    train_inputs, val_inputs = split_inputs(inputs, config.num_test_inputs, config.seed)
    state_path.parent.mkdir(parents=True, exist_ok=True)
    tmp = state_path.with_suffix(".tmp")
    tmp.write_text(
        json.dumps(
            {
                "task": task,
                "system_prompt": system_prompt,
                "train_inputs": train_inputs,
                "val_inputs": val_inputs,
            },
            indent=2,
            ensure_ascii=False,
        )
    )
    tmp.replace(state_path)
    return system_prompt, train_inputs, val_inputs


async def autorl(
    task_description: str,
    config: AutoRLConfig | None = None,
    *,
    backend: Backend | None = None,
    echo: Callable[[str], None] = print,
    hints: Literal["flags", "kwargs"] = "kwargs",
) -> AutoRLResult:
    """Train `config.base_model` for the task; see the module docstring. Raises ValueError for an empty
    task and `art.recipes.ruler_loop.NotConfiguredError` (saying what to set) when no generator or judge is given;
    `hints="flags"` words that message for the command line (`--judge ...`).

    Example:
        config = AutoRLConfig(generator="openai/gpt-4.1-mini", judge="openai/o4-mini", steps=8)
        result = await autorl("Fix the grammar of the user's text", config)
    """
    task = check_task(task_description)
    config = config or AutoRLConfig()
    # Fail before loading anything when a generator or judge is missing (self is resolved later).
    if config.generator != SELF:
        llm_spec(
            "generator", config.generator, config.generator_base_url, config.generator_api_key, hints=hints
        )
    if config.judge != SELF:
        llm_spec("judge", config.judge, config.judge_base_url, config.judge_api_key, hints=hints)
    model = TrainableModel(
        name=config.name, project=config.project, base_model=config.base_model, base_path=config.base_path
    )
    async with serving(model, backend, echo):
        generator = llm_spec(
            "generator", config.generator, config.generator_base_url, config.generator_api_key,
            trainable=model, hints=hints,
        )  # fmt: skip
        judge = llm_spec(
            "judge", config.judge, config.judge_base_url, config.judge_api_key, trainable=model, hints=hints
        )
        state_path = model.storage.root / STATE_FILE
        system_prompt, train_inputs, val_inputs = await prepare_data(
            task, config, generator, state_path, echo
        )
        echo(f"system prompt: {system_prompt}")
        echo(
            f"{len(train_inputs)} training inputs, {len(val_inputs)} held-out inputs (disjoint); e.g. {train_inputs[0][:100]!r}"
        )
        training = await train_with_ruler(
            model,
            [TaskInput(input_text=x) for x in train_inputs],
            [TaskInput(input_text=x) for x in val_inputs],
            make_rollout(system_prompt, config.temperature, config.max_tokens),
            judge,
            RulerTrainingConfig(
                steps=config.steps,
                groups_per_step=config.groups_per_step,
                rollouts_per_group=config.rollouts_per_group,
                learning_rate=config.learning_rate,
                eval_every=config.eval_every,
                seed=config.seed,
            ),
            echo=echo,
            title=f"AutoRL: {task[:60]}",
        )
        echo(f"history: {training.history_path}")
        if training.plot_path is not None:
            echo(f"plot:    {training.plot_path}")
        return AutoRLResult(
            task=task,
            system_prompt=system_prompt,
            train_inputs=train_inputs,
            val_inputs=val_inputs,
            training=training,
            state_path=state_path,
        )
