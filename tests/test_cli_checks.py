"""Every `art` command checks all its arguments before it loads anything, and answers a bad one in one line:
`art <command>: <--flag>: <what is wrong>; <what to do>`, exit code 2. And `art --version` works."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from art.cli import main

LINE = re.compile(
    r"^art(?: (?P<command>[a-z-]+))?: (?P<where>--[a-z-]+|[A-Z_]+|[a-z]+): (?P<problem>.+?); (?P<fix>.+)$"
)


@pytest.fixture
def nothing_loads(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every way a command starts its slow part fails the test loudly (a check that came too late)."""

    def started(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("the command started loading before checking its arguments")

    import art.examples.tic_tac_toe.train

    import art.backends.local
    import art.cli.demo
    import art.serve.app

    monkeypatch.setattr(art.examples.tic_tac_toe.train, "run_demo", started)
    monkeypatch.setattr(art.cli.demo, "run_remote_demo", started)
    monkeypatch.setattr(art.serve.app, "run", started)
    monkeypatch.setattr(art.backends.local.LocalBackend, "register", started)


def run_art(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as done:
        main(args)
    out, err = capsys.readouterr()
    return int(done.value.code or 0), out, err


def sft_file(tmp_path: Path) -> str:
    path = tmp_path / "data.jsonl"
    row = {"messages": [{"role": "user", "content": "2+2?"}, {"role": "assistant", "content": "4"}]}
    path.write_text(json.dumps(row) + "\n")
    return str(path)


BAD: list[tuple[list[str], str, str]] = [
    # (arguments, the flag named, a word of the problem)
    (["demo", "--steps", "-3"], "--steps", "too small"),
    (["demo", "--steps", "0"], "--steps", "too small"),
    (["demo", "--learning-rate", "-1"], "--learning-rate", "not a learning rate"),
    (["demo", "--learning-rate", "nan"], "--learning-rate", "not a learning rate"),
    (["demo", "--group-size", "1"], "--group-size", "too small"),
    (["demo", "--val-games", "-1"], "--val-games", "too small"),
    (["demo", "--time-budget-minutes", "-5"], "--time-budget-minutes", "too small"),
    (["demo", "--name", "my/model"], "--name", "not allowed"),
    (["demo", "--model", "/no/such/model"], "--model", "no folder"),
    (["demo", "--remote", "gpu-box:7999"], "--remote", "not a URL"),
    (["demo", "--steps", "abc"], "--steps", "valid integer"),
    (["demo", "--stepz", "3"], "--stepz", "no such option (did you mean --steps?)"),
    (["sft", "{file}", "--model", "m", "--schedule-type", "wavy"], "--schedule-type", "'wavy' is not one of"),
    (["sft", "{file}", "--model", "m", "--batch-size", "0"], "--batch-size", "too small"),
    (["sft", "{file}", "--model", "m", "--epochs", "0"], "--epochs", "too small"),
    (["sft", "{file}", "--model", "m", "--peak-lr", "0"], "--peak-lr", "not a learning rate"),
    (["sft", "{file}", "--model", "m", "--warmup-ratio", "1.5"], "--warmup-ratio", "not a fraction"),
    (["sft", "{file}", "--model", "m", "--final-step", "0"], "--final-step", "not after --initial-step"),
    (["sft", "{file}", "--model", "a b"], "--model", "not allowed"),
    (["sft", "{file}", "--model", "m", "--base-model", "./nowhere"], "--base-model", "no folder"),
    (["sft", "missing.jsonl", "--model", "m"], "FILE", "no file missing.jsonl"),
    (["sft", "{file}"], "--model", "missing"),
    (["serve", "--engine", "foo"], "--engine", "'foo' is not one of torch, vllm"),
    (["serve", "--port", "99999"], "--port", "not a TCP port"),
    (["serve", "--port", "-1"], "--port", "not a TCP port"),
    (["launch", "--port", "0", "--path", "{tmp}"], "--port", "not a TCP port"),
    (["serve", "--device", "gpu"], "--device", "not a device"),
    (["serve", "--train-sharding", "zero3"], "--train-sharding", "'zero3' is not one of ddp, fsdp2"),
    (["serve", "--max-body-mib", "0"], "--max-body-mib", "too small"),
    (["serve", "--gpu-cost-per-hour-usd", "-1"], "--gpu-cost-per-hour-usd", "-1.0 is not an hourly price"),
    (["launch", "--port", "70000", "--path", "{tmp}"], "--port", "not a TCP port"),
    (["launch", "--engine", "foo", "--path", "{tmp}"], "--engine", "not one of"),
    (["launch", "--gpu", "L4 x 2", "--path", "{tmp}"], "--gpu", "not a SkyPilot accelerator"),
    (["launch", "--cluster", "a/b", "--path", "{tmp}"], "--cluster", "not allowed"),
    (["autorl", "Fix grammar", "--steps", "0"], "--steps", "greater than or equal to 1"),
    (["autorl", "Fix grammar", "--rollouts-per-group", "1"], "--rollouts-per-group", "greater than or equal"),
    (["autorl", "Fix grammar", "--learning-rate", "-1"], "--learning-rate", "greater than 0"),
    (["autorl", "Fix grammar", "--num-train", "0"], "--num-train", "greater than or equal to 1"),
    (["autorl", "Fix grammar", "--name", "../x"], "--name", "not allowed"),
    (["autorl", " "], "TASK", "the task description is empty"),
    (["autorl", "Fix grammar", "--generator", "self"], "--judge", "no judge is configured"),
    (["plot", "{tmp}/nowhere"], "MODEL_DIR", "no history.jsonl in"),
    (["frob"], "frob", "no such command"),
]


@pytest.mark.parametrize(("args", "flag", "problem"), BAD, ids=[" ".join(a) for a, _, _ in BAD])
def test_a_bad_argument_is_one_line_naming_the_flag_before_anything_loads(
    args: list[str],
    flag: str,
    problem: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    nothing_loads: None,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    file = sft_file(tmp_path)
    args = [a.replace("{file}", file).replace("{tmp}", str(tmp_path)) for a in args]
    code, out, err = run_art(args, capsys)
    assert code == 2, (out, err)
    lines = err.splitlines()
    assert len(lines) == 1, err
    match = LINE.match(lines[0])
    assert match, lines[0]
    assert match["command"] == (None if args[0] == "frob" else args[0]), lines[0]
    assert match["where"] == flag, lines[0]
    assert problem in match["problem"], lines[0]
    assert match["fix"].strip(), lines[0]


def test_a_bad_sft_line_names_the_file_and_line_in_the_same_shape(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], nothing_loads: None
) -> None:
    data = tmp_path / "data.jsonl"
    data.write_text(json.dumps({"messages": [{"role": "user", "content": "q"}]}) + "\n")
    code, _, err = run_art(["sft", str(data), "--model", "m"], capsys)
    assert code == 2
    (line,) = err.splitlines()
    assert line.startswith(f"art sft: FILE: {data}, line 1: ") and "--skip-invalid" in line


def test_the_version_is_printed_and_exits_0(capsys: pytest.CaptureFixture[str]) -> None:
    from importlib.metadata import version

    code, out, err = run_art(["--version"], capsys)
    assert (code, err) == (0, "")
    assert out == f"art {version('agent-reinforcement-trainer')}\n"


def test_the_console_script_answers_in_one_line_as_a_user_sees_it(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "art", "serve", "--port", "99999", "--path", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2 and done.stdout == ""
    assert (
        done.stderr
        == "art serve: --port: 99999 is not a TCP port; give a number from 0 to 65535, e.g. 7999 (0: any free port)\n"
    )
