"""The README stands alone: two commands first, links only into the repository, and every doc it names exists."""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
README = (REPO / "README.md").read_text(encoding="utf-8")
LINK = re.compile(r"\]\(([^)\s]+)\)")


def test_the_readme_opens_with_the_two_commands() -> None:
    first_block = README.split("```bash\n", 1)[1].split("```", 1)[0]
    commands = [line for line in first_block.splitlines() if line and not line.startswith("#")]
    assert len(commands) == 2, commands
    assert commands[0].endswith("art demo")
    assert commands[1].endswith("python -m pytest -n 2")  # two workers: both cores of the documented host
    assert all(c.startswith("python3 -m venv .venv && ") for c in commands)


def test_every_link_stays_in_the_repository_and_exists() -> None:
    links = [m.group(1) for m in LINK.finditer(README)]
    local = [link.split("#", 1)[0] for link in links if not link.startswith(("http://", "https://"))]
    assert local, "the README links no document"
    for link in local:
        target = (REPO / link).resolve()
        assert target.is_relative_to(REPO), f"{link} points outside the repository"
        assert target.exists(), f"{link} does not exist"
    assert "../" not in README


def test_the_docs_named_by_the_issue_are_linked() -> None:
    for doc in ("docs/design.md", "docs/gpu.md", "docs/remote.md", "docs/compat.md"):
        assert f"]({doc})" in README, doc
