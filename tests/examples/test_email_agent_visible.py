"""Issue 56 item 5: an email agent's recorded trajectories, as `art ui` and `art show` present them: every tool
call with its arguments and id, every tool result named by the tool and call it answers (errors included),
the unreadable call as the model wrote it, and how the episode ended (its logs and metadata)."""

from __future__ import annotations

import html
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from art.examples.email_agent.inbox import Inbox, InboxConfig
from art.examples.email_agent.rollout import TaskConfig, rollout
from helpers_servers import UvicornThread

import art
from art.cli import main

pytest.importorskip("fastapi", reason="needs the `local` extra: pip install -e '.[local]'")


@pytest.fixture(scope="module")
def small() -> Iterator[Inbox]:
    store = Inbox.build(InboxConfig(seed=3, mailboxes=2, emails_per_mailbox=80))
    yield store
    store.close()


@pytest.fixture
async def record(small: Inbox, scripted_server: Any, openai_client: Any, tmp_path: Path) -> Path:
    """A val step of two episodes through the real OpenAI client: one searches, reads with a bad id, writes an
    unreadable call, reads and answers; one never calls return_final_answer."""
    q = small.questions("train")[0]
    replies = [
        {"tool_calls": [("search_emails", {"keywords": q.keywords})]},
        {"tool_calls": [("read_email", {"id": "abc"})]},
        {"content": '<tool_call>{"name": "read_email", "arguments": {"id": </tool_call>'},
        {"tool_calls": [("read_email", {"id": q.source_ids[0]})]},
        {"tool_calls": [("return_final_answer", {"answer": q.answer, "source_ids": list(q.source_ids)})]},
    ]
    turn = lambda body: sum(1 for m in body["messages"] if m["role"] == "assistant") - 3  # noqa: E731
    scripted_server.script = lambda body: replies[turn(body)]  # after the worked example's 3 calls
    answered = await rollout(openai_client, "m", small, q, config=TaskConfig())
    scripted_server.script = lambda body: {"content": "It is in your inbox."}
    silent = await rollout(openai_client, "m", small, q, config=TaskConfig(max_turns=2))
    model = art.TrainableModel(name="agent", project="email", base_model="x", base_path=str(tmp_path))
    await model.log([art.TrajectoryGroup([answered, silent])], split="val", step=0)
    return tmp_path


def test_art_show_prints_calls_arguments_results_and_the_end(
    record: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as done:
        main(["show", str(record), "--split", "val", "--step", "0"])
    out = capsys.readouterr().out
    assert done.value.code == 0, out
    call = re.search(r'-> search_emails\(\{ "keywords": "[^"]+" \}\)  \[(call_\w+)\]', out)
    assert call, out  # the call, its arguments and its id
    assert f"[tool search_emails {call[1]}] id: " in out  # its result names the tool and the call
    assert re.search(r'-> read_email\(\{ "id": "abc" \}\)  \[(call_\w+)\]', out)
    assert re.search(r"\[tool read_email call_\w+\] error: read_email: 'id' must be an integer", out)
    assert '<tool_call>{"name": "read_email", "arguments": {"id": </tool_call>' in out  # as written
    assert re.search(r'-> return_final_answer\(\{ "answer": "[^"]+", "source_ids": \[', out)
    assert "end=answered" in out and "    log: answer " in out
    # the episode that never answered: reward 0, and it says why
    assert "#1  reward 0.0000" in out
    assert "    log: no final answer: 2 turn(s) without an accepted return_final_answer call" in out
    assert "end=no final answer: 2 turn(s)" in out


def test_art_ui_shows_calls_arguments_results_and_the_end(record: Path) -> None:
    from art.ui.app import create_app

    server = UvicornThread(create_app(record), "art ui")
    url = server.start().removesuffix("/v1")
    try:
        with httpx.Client(base_url=url, timeout=30) as client:
            answered = client.get("/m/email/agent/val/0/0/0")
            silent = client.get("/m/email/agent/val/0/0/1")
    finally:
        server.stop()
    assert answered.status_code == silent.status_code == 200
    page = html.unescape(answered.text)
    call = re.search(
        r'→ <b>search_emails</b> <small class="muted">(call_\w+)</small><pre>\{\n "keywords": "', page
    )
    assert call, page  # the call, its id and its arguments
    assert f'tool · search_emails · result of {call[1]}</div><div class="content">id: ' in page  # its result
    assert re.search(r'→ <b>read_email</b> <small class="muted">call_\w+</small><pre>\{\n "id": "abc"', page)
    assert re.search(
        r'tool · read_email · result of call_\w+</div><div class="content">error: read_email', page
    )
    assert '<tool_call>{"name": "read_email", "arguments": {"id": </tool_call>' in page  # as written
    assert re.search(
        r'→ <b>return_final_answer</b> <small class="muted">call_\w+</small><pre>\{\n "answer"', page
    )
    assert "metadata.end</td><td>answered" in page
    assert "no final answer: 2 turn(s) without an accepted return_final_answer call" in silent.text
