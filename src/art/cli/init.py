"""`art init [PATH]`: a project set up for ART (the skills that teach coding assistants to write training scripts)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from art.cli.checks import CLIError

NAME = "init"
GUIDE: tuple[tuple[str, str], ...] = (
    (
        "art init [PATH]",
        "install skills so Claude Code or Codex can write training scripts\n(/train-rl, /train-sft)",
    ),
)
"""Its lines in `art help` (usage, what it does); none: listed only by `art --help`."""


def command(
    path: Annotated[Path, typer.Argument(help="The project's folder.")] = Path("."),
) -> None:
    """Set up a project for ART: installs the skills that teach coding assistants to write training scripts."""
    install_skills_into(path)


def install_skills_into(path: Path) -> None:
    """Copy the skills into `path`'s `.claude/skills/` and `.agents/skills/` and say what was written."""
    from art.skills import install_skills as install

    try:
        written = install(path)
    except (NotADirectoryError, PermissionError) as exc:
        problem, _, fix = str(exc).partition("; ")
        raise CLIError("PATH", problem, fix) from None
    typer.echo(f"Installed {len(written)} skill files into {path.resolve()}:")
    for file in written:
        typer.echo(f"  {file}")
    typer.echo("Use /train-rl and /train-sft in Claude Code or OpenAI Codex to write a training script.")
