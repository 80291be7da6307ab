"""The logic of `art autorl` (cli.py holds only the thin typer wrapper): every option is checked first
(`art.cli_checks`: one line, exit 2), then the generator and judge are asked for."""

from __future__ import annotations

import asyncio
from typing import Any

import typer
from pydantic import ValidationError

from art.cli import checks as check
from art.cli.checks import CLIError
from art.recipes.autorl.run import AutoRLConfig, autorl
from art.recipes.zero_data.endpoints import NotConfiguredError
from art.recipes.zero_data.structured import GeneratorError

FLAGS = {"num_training_inputs": "--num-train", "num_test_inputs": "--num-val"}
"""AutoRLConfig fields whose flag is not `--field-name`."""


def run_autorl_command(task: str, options: dict[str, Any]) -> None:
    """Run AutoRL from command-line options; bad input exits with code 2 and a message saying what to set."""
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
