"""`art show PATH --step N [--project P --name N]`: one group of a step in the terminal, as it was trained."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from art.cli.checks import CLIError, at_least, deprecated_alias, record_name

NAME = "show"
GUIDE: tuple[tuple[str, str], ...] = (
    ("art show PATH --step N", "one group of a step in the terminal, with advantages"),
)
"""Its lines in `art help` (usage, what it does); none: listed only by `art --help`."""


def command(
    path: Annotated[
        Path,
        typer.Argument(
            help="A model's folder, or a record folder such as .art (with --name if it holds several)."
        ),
    ],
    step: Annotated[int, typer.Option(help="The step to show.")],
    split: Annotated[str, typer.Option(help="The split: train, val, ...")] = "train",
    group: Annotated[int, typer.Option(help="Which group of the step (0 first).")] = 0,
    name: Annotated[
        str | None,
        typer.Option(
            help="The model's name (or PROJECT/NAME), when PATH holds several models.", show_default=False
        ),
    ] = None,
    project: Annotated[
        str | None, typer.Option(help="The model's project, with --name.", show_default=False)
    ] = None,
    tokens: Annotated[
        bool, typer.Option("--tokens", help="List every sampled token with its logprobs and ratio.")
    ] = False,
    model: Annotated[str | None, typer.Option("--model", hidden=True)] = None,  # deprecated: --name
) -> None:
    """Print one group of a step: each trajectory's reward, advantage, judge explanation and chat, as trained."""
    if model is not None:
        name = deprecated_alias("show", "--model", "--name", model, name or "", "")
    check_arguments(path, step, split, group, name, project)
    if project is not None and name is not None and "/" not in name:
        name = f"{project}/{name}"
    from art.ui.show import ShowError
    from art.ui.show import show as show_group

    try:
        show_group(
            str(path), step, split=split, group=group, model=name, tokens=tokens, echo=typer.echo,
            warn=lambda m: typer.echo(m, err=True),
        )  # fmt: skip
    except ShowError as exc:
        raise CLIError(exc.where, exc.problem, exc.fix) from None


def check_arguments(
    path: Path, step: int, split: str, group: int, name: str | None, project: str | None = None
) -> None:
    """Refuse what no record can hold, before reading one: a PATH that does not exist or is a file, a
    negative --step or --group, a --split, --name or --project that is not a name, --project without
    --name. (What this record holds is checked as it is read: the model, the step, the split, the group.)"""
    fix = "pass a model's folder, or the folder your runs record into (.art by default)"
    if not path.exists():
        raise CLIError("PATH", f"{path} does not exist", fix)
    if not path.is_dir():
        raise CLIError("PATH", f"{path} is a file, not a record", fix)
    at_least("--step", step, 0, "a step")
    at_least("--group", group, 0, "a group's index")
    record_name("--split", split)
    if project is not None:
        record_name("--project", project)
        if name is None:
            raise CLIError("--project", "given without --name", "give the model's --name too")
    if name is not None:
        parts = name.split("/")
        if len(parts) > 2 or (project is not None and len(parts) > 1):
            raise CLIError(
                "--name",
                f"{name!r} is not a model's name",
                "give --name NAME (with --project), or PROJECT/NAME",
            )
        for part in parts:
            record_name("--name", part)
