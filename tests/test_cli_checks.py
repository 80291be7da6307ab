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
    import art.cli.skills
    import art.cli.ui
    import art.hub.app
    import art.record.plots
    import art.ui.show

    monkeypatch.setattr(art.examples.tic_tac_toe.train, "run_demo", started)
    monkeypatch.setattr(art.cli.demo, "run_remote_demo", started)
    monkeypatch.setattr(art.hub.app, "run", started)
    monkeypatch.setattr(art.backends.local.LocalBackend, "register", started)
    monkeypatch.setattr(art.cli.ui, "ui_command", started)  # `art ui`: the web app and its server
    monkeypatch.setattr(art.ui.show, "RecordReader", started)  # `art show`: reading the record
    monkeypatch.setattr(
        art.cli.skills, "install_skills", started
    )  # `art init`, `art install-skills`: writing
    monkeypatch.setattr(art.record.plots, "plot_history", started)  # `art plot`: matplotlib


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


def model_dir(tmp_path: Path) -> str:
    """A model's folder with a history of two steps (for `art plot`)."""
    path = tmp_path / "proj" / "models" / "agent"
    path.mkdir(parents=True)
    rows = [{"step": step, "train/reward": 0.5 * step} for step in (1, 2)]
    (path / "history.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows))
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
    (["demo", "--base-model", "/no/such/model"], "--base-model", "no folder /no/such/model"),
    (
        ["demo", "--base-model", "qwen-does-not-exist"],
        "--base-model",
        "unknown name: not a short name (known: smollm2-135m",
    ),
    (["demo", "--base-model", "SomeOrg/not-cached"], "--base-model", "not in the Hugging Face cache"),
    (["demo", "--model", "a", "--base-model", "b"], "--model", "--model a and --base-model b disagree"),
    (["demo", "--remote", "gpu-box:7999"], "--remote", "not a URL"),
    (["demo", "--steps", "abc"], "--steps", "valid integer"),
    (["demo", "--stepz", "3"], "--stepz", "no such option (did you mean --steps?)"),
    (["sft", "{file}", "--name", "m", "--schedule-type", "wavy"], "--schedule-type", "'wavy' is not one of"),
    (["sft", "{file}", "--name", "m", "--batch-size", "0"], "--batch-size", "too small"),
    (["sft", "{file}", "--name", "m", "--epochs", "0"], "--epochs", "too small"),
    (["sft", "{file}", "--name", "m", "--peak-lr", "0"], "--peak-lr", "not a learning rate"),
    (["sft", "{file}", "--name", "m", "--warmup-ratio", "1.5"], "--warmup-ratio", "not a fraction"),
    (["sft", "{file}", "--name", "m", "--final-step", "0"], "--final-step", "not after --initial-step"),
    (["sft", "{file}", "--name", "a b"], "--name", "not allowed"),
    (["sft", "{file}", "--name", "m", "--base-model", "./nowhere"], "--base-model", "no folder"),
    (["sft", "{file}", "--name", "m", "--base-model", "qwen-does-not-exist"], "--base-model", "unknown name"),
    (["sft", "missing.jsonl", "--name", "m"], "FILE", "no file missing.jsonl"),
    (["sft", "{file}"], "--name", "missing"),
    (["serve", "--engine", "foo"], "--engine", "'foo' is not one of torch, vllm"),
    (["serve", "--port", "99999"], "--port", "not a TCP port"),
    (["serve", "--port", "-1"], "--port", "not a TCP port"),
    (["launch", "--port", "0", "--path", "{tmp}"], "--port", "not a TCP port"),
    (["serve", "--device", "gpu"], "--device", "not a device"),
    (["serve", "--train-sharding", "zero3"], "--train-sharding", "'zero3' is not one of ddp, fsdp2"),
    (["serve", "--max-body-mib", "0"], "--max-body-mib", "too small"),
    (["serve", "--gpu-cost-per-hour-usd", "-1"], "--gpu-cost-per-hour-usd", "-1.0 is not an hourly price"),
    (["serve", "--max-rejected-checkpoints", "-1"], "--max-rejected-checkpoints", "too small"),
    (["launch", "--port", "70000", "--path", "{tmp}"], "--port", "not a TCP port"),
    (["launch", "--engine", "foo", "--path", "{tmp}"], "--engine", "not one of"),
    (["launch", "--gpu", "L4 x 2", "--path", "{tmp}"], "--gpu", "not a SkyPilot accelerator"),
    (["launch", "--cluster", "a/b", "--path", "{tmp}"], "--cluster", "not allowed"),
    (["autorl", "Fix grammar", "--steps", "0"], "--steps", "greater than or equal to 1"),
    (["autorl", "Fix grammar", "--rollouts-per-group", "1"], "--rollouts-per-group", "greater than or equal"),
    (["autorl", "Fix grammar", "--learning-rate", "-1"], "--learning-rate", "greater than 0"),
    (["autorl", "Fix grammar", "--num-train", "0"], "--num-train", "greater than or equal to 1"),
    (["autorl", "Fix grammar", "--name", "../x"], "--name", "not allowed"),
    (["autorl", "Fix grammar", "--base-model", "/nowhere"], "--base-model", "no folder /nowhere"),
    (["autorl", " "], "TASK", "the task description is empty"),
    (["autorl", "Fix grammar", "--generator", "self"], "--judge", "no judge is configured"),
    (["plot", "{tmp}/nowhere"], "MODEL_DIR", "no history.jsonl in"),
    (["plot"], "MODEL_DIR", "missing"),
    (["plot", "{model}", "--metric", "nope"], "--metric", "no metric 'nope' in this history"),
    (["plot", "{model}", "--metric", "train/reward", "--metric", "val/x"], "--metric", "no metric 'val/x'"),
    (["plot", "{model}", "--out", "{tmp}"], "--out", "is a folder"),
    (["sft"], "FILE", "missing"),
    (["autorl"], "TASK", "missing"),
    (["ui", "--port", "99999"], "--port", "99999 is not a TCP port"),
    (["ui", "--port", "-1"], "--port", "-1 is not a TCP port"),
    (["ui", "--port", "abc"], "--port", "valid integer"),
    (["ui", "{tmp}", "--host", "0.0.0.0"], "--host", "0.0.0.0 is not this machine"),
    (["ui", "{tmp}", "--host", "example.com"], "--host", "example.com is not this machine"),
    (["ui", "{tmp}", "--host", "192.168.1.4", "--port", "0"], "--host", "not this machine"),
    (["ui", "{tmp}", "--host", " "], "--host", "the host is empty"),
    (["ui"], "PATH", ".art does not exist"),
    (["ui", "{tmp}/nowhere"], "PATH", "nowhere does not exist"),
    (["ui", "{file}"], "PATH", "data.jsonl is a file, not a record"),
    (["ui", "{tmp}", "extra"], "extra", "unexpected argument"),
    (["show", "{tmp}/nowhere", "--step", "1"], "PATH", "nowhere does not exist"),
    (["show", "{file}", "--step", "1"], "PATH", "data.jsonl is a file, not a record"),
    (["show", "--step", "1"], "PATH", "missing"),
    (["show", "{tmp}"], "--step", "missing"),
    (["show", "{tmp}", "--step", "-1"], "--step", "too small"),
    (["show", "{tmp}", "--step", "x"], "--step", "valid integer"),
    (["show", "{tmp}", "--step", "1", "--group", "-1"], "--group", "too small"),
    (["show", "{tmp}", "--step", "1", "--group", "one"], "--group", "valid integer"),
    (["show", "{tmp}", "--step", "1", "--split", "a/b"], "--split", "not allowed"),
    (["show", "{tmp}", "--step", "1", "--split", ""], "--split", "non-empty"),
    (["show", "{tmp}", "--step", "1", "--name", "a/b/c"], "--name", "not a model's name"),
    (["show", "{tmp}", "--step", "1", "--name", "proj/my model"], "--name", "not allowed"),
    (["show", "{tmp}", "--step", "1", "--project", "p", "--name", "a/b"], "--name", "not a model's name"),
    (["show", "{tmp}", "--step", "1", "--project", "p"], "--project", "given without --name"),
    (["show", "{tmp}", "--step", "1", "--project", "a b", "--name", "m"], "--project", "not allowed"),
    (["show", "{tmp}", "--step", "1", "--tokenz"], "--tokenz", "no such option (did you mean --tokens?)"),
    (["init", "{file}"], "PATH", "data.jsonl is a file"),
    (["init", "{file}/project"], "PATH", "is a file, so"),
    (["init", "{tmp}", "extra"], "extra", "unexpected argument"),
    (["install-skills", "{file}"], "PATH", "data.jsonl is a file"),
    (["install-skills", "{file}/project"], "PATH", "is a file, so"),
    (["install-skills", "--force"], "--force", "no such option"),
    (["help", "extra"], "extra", "unexpected argument"),
    (["help", "demo", "sft"], "demo", "unexpected argument (and 1 more)"),
    (["--bogus"], "--bogus", "no such option"),
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
    model = model_dir(tmp_path) if "{model}" in args else ""
    args = [a.replace("{file}", file).replace("{tmp}", str(tmp_path)).replace("{model}", model) for a in args]
    code, out, err = run_art(args, capsys)
    assert code == 2, (out, err)
    lines = err.splitlines()
    assert len(lines) == 1, err
    match = LINE.match(lines[0])
    assert match, lines[0]
    command = None if args[0] in ("frob", "--bogus") else args[0]
    assert match["command"] == command, lines[0]
    assert match["where"] == flag, lines[0]
    assert problem in match["problem"], lines[0]
    assert match["fix"].strip(), lines[0]


def test_a_bad_sft_line_names_the_file_and_line_in_the_same_shape(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], nothing_loads: None
) -> None:
    data = tmp_path / "data.jsonl"
    data.write_text(json.dumps({"messages": [{"role": "user", "content": "q"}]}) + "\n")
    code, _, err = run_art(["sft", str(data), "--name", "m"], capsys)
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


def test_every_command_has_bad_arguments_here() -> None:
    """A new command (registered in `art.cli.COMMANDS`) gets its cases in BAD too; so do `art help` and the
    root (`--bogus`, an unknown command)."""
    from art.cli import COMMANDS

    covered = {args[0] for args, _, _ in BAD}
    assert {module.NAME for module in COMMANDS} | {"help", "--bogus", "frob"} <= covered, covered


def test_art_ui_goes_on_with_good_arguments_and_a_folder_that_is_no_record_yet(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Loopback in any spelling and any port 0..65535 pass; so does a folder a run has not written into yet
    (the page says it is not a record, and shows the models once a run writes them: docs/ui.md)."""
    import art.cli.ui
    from art.cli.ui import check_bind

    served: list[tuple[Path, str, int]] = []
    monkeypatch.setattr(
        art.cli.ui, "ui_command", lambda path, host, port, echo: served.append((path, host, port))
    )
    for host, port in (
        ("127.0.0.1", 0),
        ("localhost", 65535),
        ("::1", 7998),
        ("[::1]", 1),
        ("127.1.2.3", 80),
    ):
        assert check_bind(host, port) is None, (host, port)
        code, _, err = run_art(["ui", str(tmp_path), "--host", host, "--port", str(port)], capsys)
        assert (code, err) == (0, ""), (host, port)
    assert served[0] == (tmp_path, "127.0.0.1", 0) and len(served) == 5
    assert check_bind("0.0.0.0", 7998) is not None and check_bind("127.0.0.1", 65536) is not None


def write_models(base: Path, *names: str) -> None:
    """Models `proj/<name>` with one train step (one group of two) at step 1."""
    import art
    from art.record.storage import ModelStorage

    for name in names:
        storage = ModelStorage(base, "proj", name)
        storage.write_model_json({"name": name, "project": "proj", "base_model": "tiny", "trainable": True})
        group = art.TrajectoryGroup(
            [
                art.Trajectory(messages_and_choices=[{"role": "user", "content": "hi"}], reward=reward)
                for reward in (0.0, 1.0)
            ]
        )
        storage.append_groups("train", 1, [group])
        storage.append_history(1, {"train/reward": 0.5})


@pytest.mark.parametrize(
    ("models", "args", "flag", "says"),
    [
        ((), ["--step", "1"], "PATH", "is not an ART record"),
        (
            ("a",),
            ["--step", "7"],
            "--step",
            "proj/a has no train trajectories at step 7 (steps with some: 1)",
        ),
        (
            ("a",),
            ["--step", "1", "--split", "val"],
            "--split",
            "proj/a has no val trajectories (splits: train)",
        ),
        (("a",), ["--step", "1", "--group", "1"], "--group", "step 1 of train has 1 group(s)"),
        (("a", "b"), ["--step", "1"], "--name", "holds 2 models (proj/a, proj/b)"),
        (("a", "b"), ["--step", "1", "--name", "c"], "--name", "no single model 'c'"),
        (
            ("a", "b"),
            ["--step", "1", "--project", "other", "--name", "a"],
            "--name",
            "no single model 'other/a'",
        ),
    ],
)
def test_what_the_record_lacks_is_answered_in_the_same_shape(
    models: tuple[str, ...],
    args: list[str],
    flag: str,
    says: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """`art show`'s answers that need the record read (the model, split, step, group it names) name the
    argument and what to pass, like every check before it."""
    write_models(tmp_path, *models)
    code, out, err = run_art(["show", str(tmp_path), *args], capsys)
    assert code == 2, (out, err)
    (line,) = err.splitlines()
    match = LINE.match(line)
    assert match and match["command"] == "show" and match["where"] == flag, line
    assert says in match["problem"] and match["fix"].strip(), line


def test_art_show_with_good_arguments_prints_the_group(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    write_models(tmp_path, "a", "b")
    code, out, err = run_art(
        ["show", str(tmp_path), "--step", "1", "--project", "proj", "--name", "b"], capsys
    )
    assert (code, err) == (0, "") and "proj/b · train step 1 · group 0 of 1 (2 trajectories)" in out
    code, out, err = run_art(["show", str(tmp_path), "--step", "1", "--name", "proj/b"], capsys)
    assert (code, err) == (0, "") and "proj/b · train step 1" in out
    # an old script's --model (PROJECT/NAME) still works, and says what to write now
    code, out, err = run_art(["show", str(tmp_path), "--step", "1", "--model", "proj/b"], capsys)
    assert code == 0 and "proj/b · train step 1" in out
    assert err == "art show: --model is deprecated, use --name proj/b (the same option)\n"


@pytest.mark.parametrize("command", ["init", "install-skills"])
def test_a_folder_the_skills_cannot_be_written_into_is_one_line(
    command: str, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """What the checks cannot foresee (a read-only disk, a full one) is still one line, exit 2."""
    import art.cli.skills

    def refused(target: Path) -> list[Path]:
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(art.cli.skills, "install_skills", refused)
    code, _, err = run_art([command, str(tmp_path / "project")], capsys)
    assert code == 2
    assert err == (
        f"art {command}: PATH: cannot write the skills under {tmp_path / 'project'}: Permission denied; "
        "give a folder you can write to\n"
    )


def test_art_alone_and_art_help_answer_with_exit_0(capsys: pytest.CaptureFixture[str]) -> None:
    """`art` prints its help (every command listed); `art help` how to start, every command's guide line."""
    from art.cli import COMMANDS

    code, out, err = run_art([], capsys)
    assert (code, err) == (0, "")
    for module in COMMANDS:
        assert f"  {module.NAME} " in out, module.NAME
    code, out, err = run_art(["help"], capsys)
    assert (code, err) == (0, "")
    for module in COMMANDS:
        for usage, _ in module.GUIDE:
            assert usage in out, usage
    assert "art --help" in out


def test_one_flag_names_the_base_model_and_one_the_models_name_in_every_command() -> None:
    """One flag for the base model (`--base-model`) and one for the model's name (`--name`) in every command
    that has them; `--model` is shown nowhere but in `art serve`, where it names a model to chat with (and
    `--base-model` is its other spelling)."""
    import typer.main

    from art.cli import app

    commands = typer.main.get_command(app).commands  # type: ignore[attr-defined]
    shown = {
        name: {opt for p in command.params if not getattr(p, "hidden", False) for opt in p.opts}
        for name, command in commands.items()
    }
    for name in ("demo", "sft", "autorl"):
        assert {"--base-model", "--name"} <= shown[name], (name, shown[name])
    assert "--name" in shown["show"]
    assert {"--model", "--base-model"} <= shown["serve"]
    assert [n for n, opts in shown.items() if "--model" in opts] == ["serve"]
    serve_model = next(p for p in commands["serve"].params if "--model" in p.opts)
    assert "--base-model" in serve_model.opts and serve_model.multiple  # one option, two spellings


@pytest.mark.parametrize(
    ("args", "old", "new", "field", "value"),
    [
        (["demo", "--model", "{folder}"], "--model", "--base-model {folder}", "base_model", "{folder}"),
        (["sft", "{file}", "--model", "agent"], "--model", "--name agent", "name", "agent"),
    ],
)
def test_an_old_scripts_model_flag_still_works_and_says_what_to_write_now(
    args: list[str],
    old: str,
    new: str,
    field: str,
    value: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import art.examples.tic_tac_toe.train

    import art.cli.demo
    import art.cli.sft

    folder = tmp_path / "my-model"
    folder.mkdir()
    (folder / "config.json").write_text("{}")
    seen: list[Any] = []
    monkeypatch.setattr(art.examples.tic_tac_toe.train, "run_demo", lambda config, echo: seen.append(config))
    monkeypatch.setattr(art.cli.demo.asyncio, "run", lambda value: None)
    monkeypatch.setattr(art.cli.sft, "main", lambda command, echo: seen.append(command))
    monkeypatch.chdir(tmp_path)
    fill = {"{folder}": str(folder), "{file}": sft_file(tmp_path)}
    args = [fill.get(a, a) for a in args]
    code, _, err = run_art(args, capsys)
    new = new.replace("{folder}", str(folder))
    assert (code, err) == (0, f"art {args[0]}: {old} is deprecated, use {new} (the same option)\n")
    assert getattr(seen[0], field) == value.replace("{folder}", str(folder))
    code, out, _ = run_art([args[0], "--help"], capsys)
    assert code == 0 and "--model" not in out


def test_a_failed_demo_leaves_nothing_and_a_record_of_another_base_model_names_the_flags(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The first hour as the issue met it: `art demo --base-model <typo>` fails in one line and writes
    nothing, so a plain `art demo` then is not told the model is "already registered"; and a record that
    does hold another base model is answered naming --name and --base-model, not a traceback."""
    import art.backends.local

    def never(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("the model started loading")

    monkeypatch.setattr(art.backends.local.LocalBackend, "register", never)
    monkeypatch.chdir(tmp_path)
    code, _, err = run_art(["demo", "--base-model", "qwen-does-not-exist"], capsys)
    assert code == 2 and err.startswith("art demo: --base-model: qwen-does-not-exist: unknown name")
    assert not (tmp_path / ".art").exists()

    folder = tmp_path / "my-model"
    folder.mkdir()
    (folder / "config.json").write_text("{}")
    from art.record.storage import ModelStorage

    ModelStorage(tmp_path / ".art", "demo", "tic-tac-toe").write_model_json(
        {"name": "tic-tac-toe", "project": "demo", "base_model": "qwen-does-not-exist", "trainable": True}
    )
    code, out, err = run_art(["demo", "--base-model", str(folder)], capsys)
    assert code == 2, (out, err)
    (line,) = err.splitlines()
    record = Path(".art") / "demo" / "models" / "tic-tac-toe"  # as the user gave it (--base-path .art)
    assert line == (
        f"art demo: --name: demo/tic-tac-toe is already registered in {record} with base_model "
        f"'qwen-does-not-exist', not '{folder}' (nothing was changed); give another --name for a new model, "
        "or --base-model qwen-does-not-exist to continue this one"
    )
