"""`art show PATH --step N`: one group of a step in the terminal, as it was trained."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from art.cli.checks import CLIError

NAME = "show"
GUIDE: tuple[tuple[str, str], ...] = (
    ("art show PATH --step N", "one group of a step in the terminal, with advantages"),
)
"""Its lines in `art help` (usage, what it does); none: listed only by `art --help`."""


def command(
    path: Annotated[
        Path, typer.Argument(help="A model's folder (or a record folder holding one model, or use --model).")
    ],
    step: Annotated[int, typer.Option(help="The step to show.")],
    split: Annotated[str, typer.Option(help="The split: train, val, ...")] = "train",
    group: Annotated[int, typer.Option(help="Which group of the step (0 first).")] = 0,
    model: Annotated[
        str | None, typer.Option(help="PROJECT/NAME, when PATH holds several models.", show_default=False)
    ] = None,
    tokens: Annotated[
        bool, typer.Option("--tokens", help="List every sampled token with its logprobs and ratio.")
    ] = False,
) -> None:
    """Print one group of a step: each trajectory's reward, advantage, judge explanation and chat, as trained."""
    from art.ui.show import ShowError
    from art.ui.show import show as show_group

    try:
        show_group(
            str(path), step, split=split, group=group, model=model, tokens=tokens, echo=typer.echo,
            warn=lambda m: typer.echo(m, err=True),
        )  # fmt: skip
    except ShowError as exc:
        raise CLIError("", str(exc)) from None
