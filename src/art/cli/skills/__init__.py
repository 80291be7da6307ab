"""Skills for AI coding assistants (Claude Code, OpenAI Codex): how to write ART training scripts.

`art init` / `art install-skills [PATH]` copy each `{name}/SKILL.md` shipped here into
`PATH/.claude/skills/{name}/` and `PATH/.agents/skills/{name}/` (the reference's layout), where the
assistants find them as `/train-rl` and `/train-sft`.
"""

from __future__ import annotations

from pathlib import Path

SKILL_NAMES = ("train-rl", "train-sft")
_HERE = Path(__file__).resolve().parent
_DESTINATIONS = (Path(".claude") / "skills", Path(".agents") / "skills")


def skill_path(name: str) -> Path:
    """The shipped SKILL.md of skill `name`."""
    if name not in SKILL_NAMES:
        raise ValueError(f"unknown skill {name!r}; the skills are {', '.join(SKILL_NAMES)}")
    return _HERE / name / "SKILL.md"


def install_skills(target: str | Path) -> list[Path]:
    """Copy every skill into `target`'s `.claude/skills/` and `.agents/skills/` (replacing older copies of
    ours; other skills there are left alone). Returns the files written."""
    root = Path(target)
    if root.exists() and not root.is_dir():
        raise NotADirectoryError(f"{root} is a file; give the project's folder")
    written = []
    for destination in _DESTINATIONS:
        for name in SKILL_NAMES:
            folder = root / destination / name
            folder.mkdir(parents=True, exist_ok=True)
            (folder / "SKILL.md").write_text(skill_path(name).read_text(encoding="utf-8"), encoding="utf-8")
            written.append(folder / "SKILL.md")
    return written


__all__ = ["SKILL_NAMES", "install_skills", "skill_path"]
