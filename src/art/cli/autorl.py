"""`art autorl TASK`: a model trained for a task from its description alone (docs/autorl.md).

Every option is checked first (`art.cli.checks`: one line, exit 2), then the generator and judge are asked
for. The recipe (`art.recipes.autorl`) is imported only when the command runs."""

from __future__ import annotations

import asyncio
from typing import Annotated, Any

import typer
from pydantic import ValidationError

from art.cli import checks as check
from art.cli.checks import CLIError
from art.types import RULER_LOOP_LEARNING_RATE

NAME = "autorl"
GUIDE: tuple[tuple[str, str], ...] = ()
"""Its lines in `art help` (usage, what it does); none: listed only by `art --help`."""


def command(
    task: Annotated[str, typer.Argument(help="What the model should learn, in plain English.")],
    base_model: check.BaseModelOption = "smollm2-135m",
    generator: Annotated[
        str | None,
        typer.Option(
            envvar="ART_GENERATOR",
            help="LLM that writes the inputs: a LiteLLM model string, a model name at --generator-base-url, or 'self'.",
        ),
    ] = None,
    generator_base_url: Annotated[
        str | None,
        typer.Option(envvar="ART_GENERATOR_BASE_URL", help="OpenAI-compatible endpoint of the generator."),
    ] = None,
    generator_api_key: Annotated[
        str | None, typer.Option(envvar="ART_GENERATOR_API_KEY", help="API key of the generator.")
    ] = None,
    judge: Annotated[
        str | None,
        typer.Option(
            envvar="ART_JUDGE",
            help="RULER judge: a LiteLLM model string, a model name at --judge-base-url, or 'self' (weak).",
        ),
    ] = None,
    judge_base_url: Annotated[
        str | None, typer.Option(envvar="ART_JUDGE_BASE_URL", help="OpenAI-compatible endpoint of the judge.")
    ] = None,
    judge_api_key: Annotated[
        str | None, typer.Option(envvar="ART_JUDGE_API_KEY", help="API key of the judge.")
    ] = None,
    num_train: Annotated[int | None, typer.Option(help="Training inputs to generate (default 16).")] = None,
    num_val: Annotated[int | None, typer.Option(help="Held-out inputs to generate (default 8).")] = None,
    steps: Annotated[int | None, typer.Option(help="Training steps (default 8).")] = None,
    groups_per_step: Annotated[int | None, typer.Option(help="Inputs per step (default 2).")] = None,
    rollouts_per_group: Annotated[
        int | None, typer.Option(help="Answers per input for RULER to compare (default 4).")
    ] = None,
    learning_rate: Annotated[
        float | None,
        typer.Option(help=f"AdamW learning rate (default {check.short_number(RULER_LOOP_LEARNING_RATE)})."),
    ] = None,
    max_tokens: Annotated[int | None, typer.Option(help="Tokens per answer (default 256).")] = None,
    name: Annotated[str, typer.Option(help="Name of the trained model (its folder under .art/).")] = "autorl",
    project: Annotated[str, typer.Option(help="Project folder under --base-path.")] = "autorl",
    base_path: check.BasePathOption = ".art",
    seed: Annotated[int, typer.Option(help="Seed of the train/held-out split and the batches.")] = 0,
) -> None:
    """Train a model for any task from its description alone: an LLM writes inputs, RULER judges answers.

    Needs a generator and a judge (any LiteLLM model string, or any OpenAI-compatible server with
    --*-base-url); with none set it says what to set. Ends with trained vs base on held-out inputs, and
    writes history.jsonl and a PNG plot as `art demo` does. See docs/autorl.md.
    """
    run_autorl_command(
        task,
        {
            "base_model": base_model, "generator": generator, "generator_base_url": generator_base_url,
            "generator_api_key": generator_api_key, "judge": judge, "judge_base_url": judge_base_url,
            "judge_api_key": judge_api_key, "num_training_inputs": num_train, "num_test_inputs": num_val,
            "steps": steps, "groups_per_step": groups_per_step, "rollouts_per_group": rollouts_per_group,
            "learning_rate": learning_rate, "max_tokens": max_tokens, "name": name, "project": project,
            "base_path": base_path, "seed": seed,
        },
    )  # fmt: skip


FLAGS = {"num_training_inputs": "--num-train", "num_test_inputs": "--num-val"}
"""AutoRLConfig fields whose flag is not `--field-name`."""


def run_autorl_command(task: str, options: dict[str, Any]) -> None:
    """Run AutoRL from command-line options; bad input exits with code 2 and a message saying what to set."""
    from art.recipes.autorl.run import AutoRLConfig, autorl
    from art.recipes.ruler_loop.endpoints import NotConfiguredError
    from art.recipes.ruler_loop.structured import GeneratorError

    if not task or not task.strip():
        raise CLIError(
            "TASK",
            "the task description is empty",
            "describe what the model should learn, e.g. art autorl \"Rewrite the user's text in formal "
            'business English"',
        )
    try:
        config = AutoRLConfig(**{k: v for k, v in options.items() if v is not None})
    except ValidationError as exc:
        raise check.from_validation_error(exc, FLAGS) from None
    check.record_name("--name", config.name)
    check.record_name("--project", config.project)
    check.base_model("--base-model", config.base_model)
    check.folder_or_new("--base-path", config.base_path)
    try:
        with check.registration_errors():
            result = asyncio.run(autorl(task, config, echo=typer.echo, hints="flags"))
    except NotConfiguredError as exc:  # asked before any model loads; the ways to set it, on one line
        problem, _, fix = str(exc).partition("\n")
        fix = "; ".join(" ".join(line.split()) for line in fix.splitlines())
        raise CLIError(f"--{exc.role}", problem.rstrip(":. "), fix) from None
    except GeneratorError as exc:
        typer.echo(f"art autorl: --generator: {exc}", err=True)
        raise typer.Exit(1) from None
    final = result.training.final
    typer.echo("")
    if result.training.weak_judge:
        typer.echo("judged by the base model itself (--judge self): a plumbing run, not a measure of quality")
    if final is not None and final.judged:
        typer.echo(
            f"held-out inputs ({final.judged} judged): trained {final.trained_score:.3f} vs base "
            f"{final.base_score:.3f}; trained better on {final.win_rate:.0%}"
        )
    else:
        typer.echo("held-out inputs: the judge scored none of them, so there is no comparison")
