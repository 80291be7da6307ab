"""`art install-skills [PATH]`: ART's skills for AI coding assistants, installed (as `art init` does)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from art.cli.init import install_skills_into

NAME = "install-skills"
GUIDE: tuple[tuple[str, str], ...] = ()
"""Its lines in `art help` (usage, what it does); none: listed only by `art --help`."""


def command(
    path: Annotated[Path, typer.Argument(help="The project's folder.")] = Path("."),
) -> None:
    """Install ART's skills for AI coding assistants (.claude/skills/ and .agents/skills/)."""
    install_skills_into(path)
