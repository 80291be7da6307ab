"""Every fenced python and bash block of README.md and docs/*.md runs as written, or its first line marks it as
an illustration and says why, in the page: `# illustration, not run by the tests: <why>`.

Each block runs as a reader's copy would: saved to a file and run with `python block.py` (or `bash -e`) in a
fresh process, in an empty folder, offline (the HF_HUB_OFFLINE family from tests/conftest.py), with a timeout.
So a python block with a top-level `await`, or one using a name it does not define, fails here. The one change
made to a block: every `base_model="..."` and `--base-model X` becomes a tiny random model made on the spot
(tests/conftest.py), so a block that trains takes seconds instead of minutes on the default model.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[1]
PAGES = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
ILLUSTRATION = "# illustration, not run by the tests: "
"""The first line of a block that is not run as written, then why (visible in the page)."""
FENCE = re.compile(r"^```(\w*)\n(.*?)^```", re.M | re.S)
RUN = ("python", "bash")
NOT_RUN_LANGUAGES = ("py", "python3", "pycon", "sh", "shell", "console", "zsh")  # would escape this test
RUN_ELSEWHERE = {
    "docs/benchmarking.md#2": "tests/utils/test_benchmarking_docs.py runs it as written and checks its charts",
}
"""Blocks run as written by a test of their own. The README's two commands are run by CI (`.ci/run`) and
their shape checked by tests/test_readme.py: a block whose commands start with `python3 -m venv`."""
TIMEOUT_S = 300
SFT_ROWS = [  # data/train.jsonl, the file docs/sft.md's blocks say they read
    {
        "messages": [
            {"role": "user", "content": f"What is {a} + {b}?"},
            {"role": "assistant", "content": str(a + b)},
        ]
    }
    for a, b in [(1, 2), (3, 4), (2, 2), (4, 5), (0, 7)]
]


@dataclass(frozen=True)
class Block:
    """One fenced block: `page#n` is its place (n counts the page's python and bash blocks from 1)."""

    page: str
    number: int
    lang: str
    code: str
    line: int

    @property
    def key(self) -> str:
        return f"{self.page}#{self.number}"

    @property
    def illustration(self) -> bool:
        return self.code.startswith(ILLUSTRATION)

    @property
    def readme_command(self) -> bool:
        lines = self.code.splitlines()
        return self.page == "README.md" and any(line.startswith("python3 -m venv") for line in lines)


def doc_blocks(pages: list[Path] = PAGES, root: Path = REPO) -> list[Block]:
    blocks = []
    for page in pages:
        text = page.read_text(encoding="utf-8")
        matches = [m for m in FENCE.finditer(text) if m.group(1) in RUN]
        for number, match in enumerate(matches, start=1):
            line = text[: match.start()].count("\n") + 1
            blocks.append(Block(str(page.relative_to(root)), number, match.group(1), match.group(2), line))
    return blocks


def runnable(blocks: list[Block]) -> list[Block]:
    return [b for b in blocks if not b.illustration and not b.readme_command and b.key not in RUN_ELSEWHERE]


def swap_models(code: str, model: Path) -> str:
    """The block with every base model replaced by the tiny one (the only change made to a block)."""
    code = re.sub(r'base_model="[^"]*"', f'base_model="{model}"', code)
    return re.sub(r"--base-model \S+", f"--base-model {model}", code)


def run_block(block: Block, model: Path, folder: Path) -> subprocess.CompletedProcess[str]:
    """Run `block` as a reader would, in `folder`: `python block.py` or `bash -e -o pipefail block.sh`."""
    code = swap_models(block.code, model)
    # ART_TRAIN_COMPILE=0: the blocks are under test, not the compiled training kernels (their own tests);
    # the venv's bin first, so `art` is this checkout's command
    env = {
        **os.environ,
        "ART_TRAIN_COMPILE": "0",
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
    }
    if block.lang == "python":
        (folder / "block.py").write_text(code)
        command = [sys.executable, "block.py"]
    else:
        (folder / "block.sh").write_text(code)
        command = ["bash", "-e", "-o", "pipefail", "block.sh"]
    return subprocess.run(command, cwd=folder, env=env, capture_output=True, text=True, timeout=TIMEOUT_S)


def test_every_block_is_run_or_marked_as_an_illustration_with_its_reason() -> None:
    blocks = doc_blocks()
    assert len(blocks) >= 30, len(blocks)
    for block in blocks:
        if block.illustration:
            why = block.code.splitlines()[0].removeprefix(ILLUSTRATION)
            assert len(why.strip()) > 10, f"{block.key} (line {block.line}): say why it is not run"
        assert ILLUSTRATION.strip() not in block.code[1:], f"{block.key}: the mark goes on the first line"
    for key in RUN_ELSEWHERE:
        assert any(b.key == key and b.lang == "python" and not b.illustration for b in blocks), key
    assert sum(b.readme_command for b in blocks) == 2  # command 1 and command 2
    assert len(runnable(blocks)) >= 10  # the rest run below
    assert any(b.page == "README.md" and b.lang == "python" for b in runnable(blocks))  # the README's example


def test_no_code_block_hides_under_another_language_tag() -> None:
    for page in PAGES:
        langs = {m.group(1) for m in FENCE.finditer(page.read_text(encoding="utf-8"))}
        assert not langs & set(NOT_RUN_LANGUAGES), f"{page.name}: use ```python or ```bash: {langs}"


def test_an_unmarked_block_that_fails_as_written_fails_here(tmp_path: Path) -> None:
    """The check can fail: a block with a top-level `await` (what a notebook allows, a script does not) is
    collected unless marked, and fails when run; a marked one is left out."""
    page = tmp_path / "page.md"
    page.write_text(
        "```python\nimport asyncio\n\nawait asyncio.sleep(0)\n```\n\n"
        f"```python\n{ILLUSTRATION}a sketch, with a reason\nawait undefined()\n```\n"
    )
    blocks = doc_blocks([page], tmp_path)
    assert [b.illustration for b in blocks] == [False, True]
    (block,) = runnable(blocks)
    done = run_block(block, tmp_path / "no-model", tmp_path)
    assert done.returncode != 0 and "'await' outside function" in done.stderr, done.stderr


@pytest.fixture()
def block_folder(tmp_path: Path) -> Path:
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "train.jsonl").write_text("".join(json.dumps(r) + "\n" for r in SFT_ROWS))
    return tmp_path


def _params() -> list[Any]:
    return [pytest.param(b, id=f"{b.key}:{b.line}") for b in runnable(doc_blocks())]


@pytest.mark.slow
@pytest.mark.parametrize("block", _params())
def test_the_block_runs_as_written(block: Block, tiny_model_path: Path, block_folder: Path) -> None:
    done = run_block(block, tiny_model_path, block_folder)
    assert done.returncode == 0, (
        f"{block.key} (line {block.line}) failed as written; fix it or mark it "
        f"`{ILLUSTRATION}<why>`:\n{block.code}\n{done.stdout[-2000:]}{done.stderr[-4000:]}"
    )
