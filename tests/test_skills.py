"""`art init` / `art install-skills` / `art help`: the skills that teach coding assistants to write ART
training scripts land where Claude Code and Codex look, and name only API that exists."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from test_cli_ux import art as run_art

import art
from art.cli.skills import SKILL_NAMES, install_skills, skill_path


@pytest.mark.parametrize("command", ["init", "install-skills"])
def test_the_skills_land_in_both_assistants_folders(tmp_path: Path, command: str) -> None:
    (tmp_path / ".claude" / "skills" / "mine").mkdir(parents=True)  # the user's own skill stays
    done = run_art(command, str(tmp_path))
    assert done.returncode == 0, done.stderr
    assert "Installed 4 skill files" in done.stdout and "/train-rl" in done.stdout
    for root in (".claude", ".agents"):
        for name in SKILL_NAMES:
            text = (tmp_path / root / "skills" / name / "SKILL.md").read_text()
            assert text == skill_path(name).read_text()
            front = re.match(r"^---\nname: (\S+)\ndescription: (.+)\n---\n", text)
            assert front is not None and front.group(1) == name and len(front.group(2)) > 80
    assert (tmp_path / ".claude" / "skills" / "mine").is_dir()
    again = run_art(command, str(tmp_path))  # idempotent
    assert again.returncode == 0 and len(install_skills(tmp_path)) == 4


def test_a_file_instead_of_a_folder_is_one_line_and_exit_2(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("x")
    done = run_art("init", str(tmp_path / "notes.txt"))
    assert (
        done.returncode == 2
        and done.stderr.strip()
        == f"art init: PATH: {tmp_path / 'notes.txt'} is a file; give the project's folder"
    )


def test_art_help_says_how_to_start() -> None:
    done = run_art("help")
    assert done.returncode == 0, done.stderr
    assert "art demo" in done.stdout and "art init" in done.stdout and "/train-sft" in done.stdout


@pytest.mark.parametrize("name", SKILL_NAMES)
def test_the_skills_name_only_api_that_exists(name: str) -> None:
    """Every `art.X` / `art.X.Y` the skill's code uses resolves, so an assistant following it writes code
    that runs here."""
    text = skill_path(name).read_text()
    used = set(re.findall(r"\bart\.([A-Za-z_][\w.]*[A-Za-z_\d])", text))
    assert {"TrainableModel", "Trajectory"} & used
    for dotted in used:
        obj: object = art
        parts = dotted.split(".")
        for i, part in enumerate(parts):
            if not hasattr(obj, part):  # a submodule not imported by `import art`
                obj = __import__("art." + ".".join(parts[: i + 1]), fromlist=["_"])
            else:
                obj = getattr(obj, part)
    from art.utils.sft import train_sft_from_file  # noqa: F401  (the SFT skill's import)
