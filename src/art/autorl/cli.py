"""The logic of `art autorl` (cli.py holds only the thin typer wrapper)."""

from __future__ import annotations

import asyncio
from typing import Any

import typer

from ..zero_data.endpoints import NotConfiguredError
from ..zero_data.structured import GeneratorError
from .run import AutoRLConfig, autorl


def run_autorl_command(task: str, options: dict[str, Any]) -> None:
    """Run AutoRL from command-line options; bad input exits with code 2 and a message saying what to set."""
    if not task or not task.strip():
        raise typer.BadParameter(
            "the task description is empty: describe what the model should learn, e.g. "
            'art autorl "Rewrite the user\'s text in formal business English"',
            param_hint="TASK",
        )
    config = AutoRLConfig(**{k: v for k, v in options.items() if v is not None})
    try:
        result = asyncio.run(autorl(task, config, echo=typer.echo, hints="flags"))
    except NotConfiguredError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from None
    except GeneratorError as exc:
        typer.echo(f"error: {exc}", err=True)
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
