"""`art demo email`: the email agent's train script with its own defaults, the options given on top; `art demo`
alone still trains tic-tac-toe; an unknown task or bad email input is one line and exit 2, before anything
loads. (The train script itself, end to end on a tiny model: tests/examples/test_email_agent_train.py.)"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from art.cli import main


def run_art(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as done:
        main(args)
    out, err = capsys.readouterr()
    return int(done.value.code or 0), out, err


@pytest.fixture
def started(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, Any]]:
    """What each task's train function was called with (nothing trains)."""
    import art.examples.email_agent.train as email
    import art.examples.tic_tac_toe.train as tic_tac_toe

    calls: list[tuple[str, Any]] = []

    async def email_run(config: Any, *, backend: Any = None, echo: Any = print) -> None:
        calls.append(("email", config))
        echo("the email agent's table")

    async def tic_tac_toe_run(config: Any, echo: Any = print, **kwargs: Any) -> None:
        calls.append(("tic-tac-toe", config))

    monkeypatch.setattr(email, "run", email_run)
    monkeypatch.setattr(tic_tac_toe, "run_demo", tic_tac_toe_run)
    return calls


def test_art_demo_email_runs_the_train_script_with_its_defaults(
    started: list[tuple[str, Any]], capsys: pytest.CaptureFixture[str]
) -> None:
    from art.examples.email_agent.train import EmailAgentConfig

    code, out, err = run_art(["demo", "email"], capsys)
    assert (code, err) == (0, "") and "the email agent's table" in out
    [(task, config)] = started
    assert task == "email" and config == EmailAgentConfig()  # the script's defaults, untouched


def test_art_demo_alone_still_trains_tic_tac_toe(
    started: list[tuple[str, Any]], capsys: pytest.CaptureFixture[str]
) -> None:
    for args in (["demo"], ["demo", "tic-tac-toe"], ["demo", "--quick"]):
        code, _, err = run_art(args, capsys)
        assert (code, err) == (0, "")
        (task, config), *_ = started
        assert task == "tic-tac-toe" and config.name == "tic-tac-toe", args
        started.clear()


def test_the_options_given_override_the_email_defaults(
    started: list[tuple[str, Any]], capsys: pytest.CaptureFixture[str]
) -> None:
    from art.examples.email_agent.train import EmailAgentConfig

    args = ["demo", "email", "--quick", "--steps", "3", "--seed", "5", "--group-size", "4", "--name", "e1"]
    args += ["--learning-rate", "2e-5", "--time-budget-minutes", "9", "--base-path", "runs"]
    code, _, err = run_art(args, capsys)
    assert (code, err) == (0, "")
    expected = EmailAgentConfig.quick(
        steps=3,
        seed=5,
        group_size=4,
        name="e1",
        learning_rate=2e-5,
        time_budget_minutes=9.0,
        base_path="runs",
    )
    assert started.pop() == ("email", expected)
    run_art(["demo", "email", "--sft-warmup"], capsys)
    recipe = EmailAgentConfig.recipe()
    assert started.pop() == ("email", recipe)
    assert recipe.sft_warmup and recipe.time_budget_minutes == 30 and not recipe.task.few_shot
    run_art(["demo", "email", "--rl-only"], capsys)
    assert started.pop() == ("email", replace(EmailAgentConfig(), sft_warmup=False))


@pytest.mark.parametrize(
    ("args", "line"),
    [
        (["demo", "chess"], "art demo: TASK: 'chess' is not a demo task; known tasks: tic-tac-toe, email"),
        (
            ["demo", "email", "--seed", "2000000"],
            "art demo: --seed: must be an integer from 0 to 999999, got 2000000; see `art demo --help`",
        ),
        (
            ["demo", "email", "--val-games", "3"],
            "art demo: --val-games: counts tic-tac-toe's held-out games; leave it out with `art demo email`",
        ),
        (
            ["demo", "email", "--sft-warmup", "--remote", "http://127.0.0.1:9"],
            "art demo: --sft-warmup: art serve trains RL only (no SFT); drop it, or train here",
        ),
        (["demo", "email", "--steps", "0"], "art demo: --steps: 0 is too small"),
    ],
)
def test_bad_input_is_one_line_and_exit_2_before_anything_loads(
    args: list[str], line: str, started: list[tuple[str, Any]], capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = run_art(args, capsys)
    assert code == 2 and out == "" and err.count("\n") == 1 and err.startswith(line), err
    assert started == []


def test_a_split_the_inbox_cannot_hold_is_one_line_and_exit_2(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The train script's own checks (here: more training questions than a small inbox has) come back as the
    demo's line, before the model loads."""
    import art.examples.email_agent.train as email

    from art.backends.local import LocalBackend

    def loads(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("the model started loading before the inbox was checked")

    monkeypatch.setattr(LocalBackend, "register", loads)
    monkeypatch.setattr(email.EmailAgentConfig, "quick", classmethod(lambda cls, **o: cls(
        mailboxes=2, emails_per_mailbox=40, val_questions=4, sft_questions=500, **o)))  # fmt: skip
    code, _, err = run_art(["demo", "email", "--quick", "--sft-warmup"], capsys)
    assert code == 2 and err.count("\n") == 1, err
    assert err.startswith("art demo: groups_per_step: the inbox has "), err
    assert "training questions" in err and "generate more emails per mailbox" in err
