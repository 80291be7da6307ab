"""`art show PATH --step N`: one group of a step in the terminal, as it was trained."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from art.cli.checks import CLIError, at_least, record_name

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
    check_arguments(path, step, split, group, model)
    from art.ui.show import ShowError
    from art.ui.show import show as show_group

    try:
        show_group(
            str(path), step, split=split, group=group, model=model, tokens=tokens, echo=typer.echo,
            warn=lambda m: typer.echo(m, err=True),
        )  # fmt: skip
    except ShowError as exc:
        raise CLIError(exc.where, exc.problem, exc.fix) from None


def check_arguments(path: Path, step: int, split: str, group: int, model: str | None) -> None:
    """Refuse what no record can hold, before reading one: a PATH that does not exist or is a file, a
    negative --step or --group, a --split or --model that is not a name. (What this record holds is
    checked as it is read: the model, the step, the split, the group.)"""
    fix = "pass a model's folder, or the folder your runs record into (.art by default)"
    if not path.exists():
        raise CLIError("PATH", f"{path} does not exist", fix)
    if not path.is_dir():
        raise CLIError("PATH", f"{path} is a file, not a record", fix)
    at_least("--step", step, 0, "a step")
    at_least("--group", group, 0, "a group's index")
    record_name("--split", split)
    if model is not None:
        parts = model.split("/")
        if len(parts) > 2:
            raise CLIError("--model", f"{model!r} is not a model's name", "give PROJECT/NAME or NAME")
        for part in parts:
            record_name("--model", part)
