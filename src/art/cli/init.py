"""`art init [PATH]`: a project set up for ART (the skills that teach coding assistants to write training scripts)."""

from __future__ import annotations

import os
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


def check_folder(path: Path) -> None:
    """Refuse a PATH the skills cannot be written under, before writing any: a file, or a folder to be made
    under a file or where this user cannot write (a PATH that does not exist yet is made)."""
    if path.exists() and not path.is_dir():
        raise CLIError("PATH", f"{path} is a file", "give the project's folder")
    existing = next((p for p in (path.absolute(), *path.absolute().parents) if p.exists()), None)
    if existing is not None and existing != path.absolute() and not existing.is_dir():
        raise CLIError("PATH", f"{existing} is a file, so {path} cannot be made", "give the project's folder")
    if existing is not None and not os.access(existing, os.W_OK | os.X_OK):
        raise CLIError("PATH", f"{existing} cannot be written by you", "give a folder you can write to")


def install_skills_into(path: Path) -> None:
    """Copy the skills into `path`'s `.claude/skills/` and `.agents/skills/` and say what was written."""
    check_folder(path)
    from art.cli.skills import install_skills as install

    try:
        written = install(path)
    except OSError as exc:  # what the checks cannot foresee: a read-only disk, a full one, /proc
        problem = f"cannot write the skills under {path}: {exc.strerror or exc}"
        raise CLIError("PATH", problem, "give a folder you can write to") from None
    typer.echo(f"Installed {len(written)} skill files into {path.resolve()}:")
    for file in written:
        typer.echo(f"  {file}")
    typer.echo("Use /train-rl and /train-sft in Claude Code or OpenAI Codex to write a training script.")
