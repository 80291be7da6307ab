"""Issue 56's "Bad input" rows, each through the commands a user runs (the train script and the inbox writer):
a question id or seed outside the generated set, a missing database, an inbox too small for the asked split
is one line and exit 2, before any model loads; a model that never calls return_final_answer within N turns
gets nothing for an answer and its trajectory says why. (`art demo email`: tests/test_cli_demo_email.py;
the library's own errors: test_email_agent.py's test_bad_input_is_one_clear_error.)"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from art.examples.email_agent.inbox import EmailAgentInputError, Inbox, InboxConfig
from art.examples.email_agent.rollout import TaskConfig, rollout


@pytest.fixture
def nothing_loads(monkeypatch: pytest.MonkeyPatch) -> None:
    from art.backends.local import LocalBackend

    def started(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("the model started loading before the input was checked")

    monkeypatch.setattr(LocalBackend, "register", started)


def one_line_exit_2(main: Any, argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    with pytest.raises(SystemExit) as done:
        main(argv)
    err = capsys.readouterr().err
    assert done.value.code == 2 and err.count("\n") == 1, err
    return err.rstrip("\n")


@pytest.mark.parametrize(
    ("argv", "line"),
    [
        # a question id outside the generated set
        (["--explain", "-1"], r"error: question id: -1 is not in this inbox \(seed 0\); use 0 to \d+"),
        (["--explain", "834"], r"error: question id: 834 is not in this inbox \(seed 0\); use 0 to 833"),
        # a seed outside the generated set
        (["--seed", "1000000"], r"error: seed: must be an integer from 0 to 999999, got 1000000"),
        # a missing database (or a folder where the file should be)
        (
            ["--db", "{tmp}/none.sqlite"],
            r"error: database: no file at .*none\.sqlite; write one with `python -m ",
        ),
        (["--db", "{tmp}"], r"error: database: no file at .*; write one with `python -m art\.examples"),
        # an inbox too small for the asked split: held-out, then training (a step and the SFT warm-up)
        (
            ["--quick", "--val-questions", "400"],
            r"error: val_questions: the inbox \(seed 0, 2 mailboxes of 80 ",
        ),
        (
            ["--quick", "--sft-warmup", "--sft-questions", "500"],
            r"error: groups_per_step: the inbox has 21 training questions, a step and the SFT warm-up need 502; "
            r"ask for fewer or generate more emails per mailbox",
        ),
    ],
)
def test_the_train_script_answers_each_bad_input_row_in_one_line(
    argv: list[str], line: str, tmp_path: Path, nothing_loads: None, capsys: pytest.CaptureFixture[str]
) -> None:
    from art.examples.email_agent.train import main

    err = one_line_exit_2(main, [a.replace("{tmp}", str(tmp_path)) for a in argv], capsys)
    assert re.fullmatch(line + ".*", err), err


@pytest.mark.parametrize(
    ("argv", "line"),
    [
        (["--seed", "-1"], "error: seed: must be an integer from 0 to 999999, got -1"),
        (["--seed", "abc"], "error: argument --seed: invalid int value: 'abc'"),  # argparse's, in one line
        (["--emails-per-mailbox", "10"], "error: emails_per_mailbox: must be at least 40, got 10"),
        (["--mailboxes", "2", "--val-mailboxes", "2"], "error: val_mailboxes: "),
        (
            ["--out", "{tmp}/no/such/folder/inbox.sqlite"],
            "error: database: no folder {tmp}/no/such/folder to ",
        ),
        (
            ["--out", "{tmp}"],
            "error: database: {tmp} is a folder; give a file's name, e.g. {tmp}/inbox.sqlite",
        ),
    ],
)
def test_the_inbox_writer_answers_bad_input_in_one_line(
    argv: list[str], line: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from art.examples.email_agent.inbox import main

    err = one_line_exit_2(main, [a.replace("{tmp}", str(tmp_path)) for a in argv], capsys)
    assert err.startswith(line.replace("{tmp}", str(tmp_path))), err
    assert list(tmp_path.iterdir()) == []  # nothing written


def test_the_inbox_writer_writes_what_the_train_script_reads(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from art.examples.email_agent.inbox import main

    path = tmp_path / "inbox.sqlite"
    main(["--seed", "7", "--mailboxes", "2", "--emails-per-mailbox", "40", "--out", str(path)])
    out = capsys.readouterr().out
    assert out.startswith(f"{path}: 80 emails in 2 mailboxes; ") and " train and " in out
    store = Inbox.open(path)
    try:
        assert store.config == InboxConfig(seed=7, mailboxes=2, emails_per_mailbox=40)
        with pytest.raises(EmailAgentInputError, match=r"^question id: 9999 is not in this inbox \(seed 7\)"):
            store.question(9999)
    finally:
        store.close()


async def test_searching_every_turn_without_answering_scores_zero_and_says_why(
    scripted_server: Any, openai_client: Any
) -> None:
    """The text-only case is test_email_agent.py's test_no_final_answer_scores_zero_and_says_why; here the
    model calls a tool every turn (well formed) but never return_final_answer: it scores 0 (no credit for the
    well-formed calls either), and the trajectory says why."""
    store = Inbox.build(InboxConfig(seed=3, mailboxes=2, emails_per_mailbox=80))
    try:
        q = store.questions("train")[0]
        scripted_server.script = lambda body: {"tool_calls": [("search_emails", {"keywords": q.keywords})]}
        t = await rollout(openai_client, "m", store, q, config=TaskConfig(max_turns=4))
    finally:
        store.close()
    m = t.metrics
    assert (m["answered"], m["correct"], m["right_sources"], m["source_f1"]) == (0.0, 0.0, 0.0, 0.0)
    assert (m["turns"], m["searches"], m["tool_calls"], m["malformed_tool_calls"]) == (4, 4, 4, 0)
    assert t.reward == 0.0
    why = "no final answer: 4 turn(s) without an accepted return_final_answer call"
    assert t.metadata["end"] == why and t.logs[-1] == why and t.metadata["answer"] is None
