"""Email agent: the seeded inbox and its store, the tools, the rewards (RULER included), the rollout through a
real OpenAI client (a scripted server), and bad input. The training run on a tiny model is in
test_email_agent_train.py."""

from __future__ import annotations

import json
import re
from collections import Counter
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from art.examples.email_agent.inbox import EmailAgentInputError, Inbox, InboxConfig, Question
from art.examples.email_agent.rewards import (
    RUBRIC,
    TERMS,
    email_reward,
    is_correct,
    score,
    source_f1,
)
from art.examples.email_agent.rollout import (
    REMINDER,
    TaskConfig,
    example_messages,
    expert_messages,
    rollout,
)
from art.examples.email_agent.tools import TOOLS, run_tool

import art

SMALL = InboxConfig(seed=3, mailboxes=2, emails_per_mailbox=80)


@pytest.fixture(scope="module")
def inbox() -> Any:
    """The default inbox (6 mailboxes of 500 emails), in memory."""
    store = Inbox.build(InboxConfig())
    yield store
    store.close()


@pytest.fixture(scope="module")
def small() -> Any:
    store = Inbox.build(SMALL)
    yield store
    store.close()


# ---------------------------------------------------------------- the generator and the store


def test_the_same_seed_writes_the_same_bytes(tmp_path: Path) -> None:
    first, second = tmp_path / "a.sqlite", tmp_path / "b.sqlite"
    Inbox.build(SMALL, first).close()
    Inbox.build(SMALL, second).close()
    assert first.read_bytes() == second.read_bytes()
    opened, in_memory = Inbox.open(first), Inbox.build(SMALL)
    other = Inbox.build(replace(SMALL, seed=4))
    try:
        assert opened.dump() == in_memory.dump() != other.dump()
        assert opened.questions() == in_memory.questions() and opened.config == SMALL
    finally:
        for store in (opened, in_memory, other):
            store.close()
    Inbox.build(SMALL, first).close()  # an existing file is replaced, not appended to
    assert first.read_bytes() == second.read_bytes()


def test_the_default_inbox_sizes_kinds_and_difficulties(inbox: Inbox) -> None:
    assert inbox.count() == 3000 and len(inbox.mailboxes) == 6
    assert all(inbox.count(m) == 500 for m in inbox.mailboxes)
    questions = inbox.questions()
    assert [q.id for q in questions] == list(range(len(questions))) and 600 <= len(questions) <= 1000
    assert {q.kind for q in questions} == {"order", "flight", "hotel", "meeting", "invoice", "thread"}
    shares = Counter(q.difficulty for q in questions)
    assert all(0.15 <= shares[d] / len(questions) <= 0.55 for d in ("easy", "medium", "hard")), shares
    assert len({(q.mailbox, q.text) for q in questions}) == len(questions)  # no question asked twice
    assert all(len(q.answer) <= 30 for q in questions)  # short strings: names, dates, amounts, codes


def test_every_answer_is_in_its_source_emails(inbox: Inbox) -> None:
    used: Counter[int] = Counter()
    for q in inbox.questions():
        sources = [inbox.email(i, q.mailbox) for i in q.source_ids]
        assert all(e is not None for e in sources), q  # every source is in the question's mailbox
        holder = inbox.email(q.answer_id, q.mailbox)
        assert holder is not None and q.answer_id in q.source_ids
        assert q.answer in f"{holder.sender} {holder.subject} {holder.date} {holder.body}", q
        assert (len(q.source_ids) == 2) == (q.kind == "thread")
        used.update(q.source_ids)
    assert max(used.values()) == 1  # no email is the source of two questions


def test_train_and_val_never_share_an_email(inbox: Inbox) -> None:
    train, val = inbox.questions("train"), inbox.questions("val")
    assert len(val) >= 64 and len(train) > 4 * len(val)
    assert not {i for q in train for i in q.source_ids} & {i for q in val for i in q.source_ids}
    assert not {q.mailbox for q in train} & {q.mailbox for q in val}  # held out: a whole mailbox
    assert {q.mailbox for q in val} == {inbox.mailboxes[-1]}


def test_the_expert_solves_every_question_through_the_tools(inbox: Inbox) -> None:
    config = TaskConfig(few_shot=False)
    for q in inbox.questions()[::7]:
        messages = expert_messages(inbox, q, config)
        calls = [m["tool_calls"][0]["function"] for m in messages if m.get("tool_calls")]
        names = [c["name"] for c in calls]
        assert names == ["search_emails", *["read_email"] * len(q.source_ids), "return_final_answer"], q
        final = run_tool(inbox, q.mailbox, calls[-1]["name"], calls[-1]["arguments"])
        assert (
            final.final and is_correct(final.answer, q.answer) and set(final.source_ids) == set(q.source_ids)
        )
        hits = json.loads(calls[0]["arguments"])
        assert hits == {"keywords": q.keywords}


def test_easy_questions_show_the_answer_in_the_search_results(inbox: Inbox) -> None:
    for q in inbox.questions(difficulty="easy")[:40]:
        assert (
            q.answer
            in run_tool(inbox, q.mailbox, "search_emails", json.dumps({"keywords": q.keywords})).content
        )


# ---------------------------------------------------------------- tools


def _order_question(store: Inbox) -> Question:
    return next(q for q in store.questions() if q.kind == "order")


def test_search_with_filters_and_read(small: Inbox) -> None:
    q = _order_question(small)
    target = small.email(q.answer_id, q.mailbox)
    assert target is not None
    shop = target.sender.split(" <")[0]
    found = run_tool(small, q.mailbox, "search_emails", json.dumps({"keywords": q.keywords}))
    assert not found.malformed and q.answer_id in found.hit_ids and len(found.hit_ids) <= 5
    assert f"id: {q.answer_id} | date: {target.date} | from: {target.sender}" in found.content
    narrowed = run_tool(
        small, q.mailbox, "search_emails",
        json.dumps({"keywords": q.keywords, "from_address": "orders@", "sent_after": target.date, "sent_before": target.date}),
    )  # fmt: skip
    assert q.answer_id in narrowed.hit_ids
    assert all(small.email(i, q.mailbox).date == target.date for i in narrowed.hit_ids)  # type: ignore[union-attr]
    later = run_tool(
        small, q.mailbox, "search_emails", json.dumps({"keywords": q.keywords, "sent_after": "2099-01-01"})
    )
    assert later.hit_ids == [] and later.content == "no emails found" and not later.malformed
    other = run_tool(
        small, q.mailbox, "search_emails", json.dumps({"keywords": shop, "from_address": "nobody"})
    )
    assert other.hit_ids == []
    read = run_tool(small, q.mailbox, "read_email", json.dumps({"id": q.answer_id}))
    assert (
        read.read_id == q.answer_id
        and target.body in read.content
        and f"subject: {target.subject}" in read.content
    )
    assert (
        run_tool(small, q.mailbox, "search_emails", json.dumps({"keywords": "the of my"})).content
        == "no emails found"
    )
    assert (
        run_tool(small, q.mailbox, "search_emails", json.dumps({"keywords": 'a "quote" OR (NEAR'})).malformed
        is False
    )


@pytest.mark.parametrize(
    ("name", "arguments", "message"),
    [
        ("delete_email", "{}", "unknown tool 'delete_email'"),
        ("read_email", "{not json", "not valid JSON"),
        ("read_email", "[1, 2]", "must be a JSON object"),
        ("read_email", "{}", "missing argument 'id'"),
        ("read_email", '{"id": "12"}', "'id' must be an integer"),
        ("read_email", '{"id": true}', "'id' must be an integer"),
        ("read_email", '{"email_id": 12}', "unknown argument 'email_id'"),
        ("search_emails", '{"keywords": 42}', "'keywords' must be a string"),
        ("search_emails", '{"keywords": "  "}', "'keywords' is empty"),
        ("search_emails", '{"keywords": "x", "sent_after": "March 3"}', "'sent_after' must be a date YYYY-MM-DD"),
        ("search_emails", '{"keywords": "x", "sent_before": "2024-02-30"}', "'sent_before' must be a date"),
        ("return_final_answer", '{"answer": "x"}', "missing argument 'source_ids'"),
        ("return_final_answer", '{"answer": "x", "source_ids": "5"}', "must be a list of integer email ids"),
        ("return_final_answer", '{"answer": " ", "source_ids": []}', "'answer' is empty"),
    ],
)  # fmt: skip
def test_bad_calls_get_an_error_string_and_count_as_malformed(
    small: Inbox, name: str, arguments: str, message: str
) -> None:
    outcome = run_tool(small, small.mailboxes[0], name, arguments)
    assert outcome.malformed and not outcome.final
    assert outcome.content.startswith("error: ") and message in outcome.content


def test_unknown_ids_are_well_formed_but_counted(small: Inbox) -> None:
    mine = small.mailboxes[0]
    foreign = small.questions("val")[0].answer_id  # an email of the other mailbox
    for email_id in (999_999, foreign):
        read = run_tool(small, mine, "read_email", json.dumps({"id": email_id}))
        assert not read.malformed and read.missing_ids == [email_id]
        assert read.content == f"error: no email with id {email_id} in this inbox"
    q = small.questions("train")[0]
    final = run_tool(
        small,
        mine,
        "return_final_answer",
        json.dumps({"answer": q.answer, "source_ids": [q.answer_id, 999_999]}),
    )
    assert final.final and final.answer == q.answer and final.missing_ids == [999_999]
    assert final.source_ids == [q.answer_id, 999_999] and final.content == "answer recorded"


def test_tool_schemas_are_openai_functions() -> None:
    assert [t["function"]["name"] for t in TOOLS] == ["search_emails", "read_email", "return_final_answer"]
    for tool in TOOLS:
        params = tool["function"]["parameters"]
        assert tool["type"] == "function" and params["type"] == "object"
        assert set(params["required"]) <= set(params["properties"])


# ---------------------------------------------------------------- rewards


@pytest.mark.parametrize(
    ("answer", "expected", "right"),
    [
        ("B214", "B214", True), ("Room B214.", "B214", True), ("sw-418", "SW418", True),
        ("$1234.50", "$1,234.50", True), ("It cost $45.00", "$45.00", True), ("$145.00", "$45.00", False),
        ("2024-03-12", "2024-03-12", True), ("March 12", "2024-03-12", False), ("Priya Patel", "Priya Patel", True),
        ("Priya", "Priya Patel", False), ("", "B214", False), (None, "B214", False), ("B214 " + "x" * 100, "B214", False),
    ],
)  # fmt: skip
def test_answers_match_after_normalising(answer: str | None, expected: str, right: bool) -> None:
    assert is_correct(answer, expected) is right


def test_hedging_and_source_f1() -> None:
    assert not is_correct("B214 or C310", "B214", others=["C310"])
    assert is_correct("B214", "B214", others=["C310", "B214"])
    assert source_f1([5], [5]) == 1.0 and source_f1([], [5]) == 0.0 and source_f1([7], [5]) == 0.0
    assert source_f1([5], [5, 6]) == pytest.approx(2 / 3) and source_f1([5, 8], [5]) == pytest.approx(2 / 3)


def _scored(**metrics: float) -> art.Trajectory:
    base = {
        "correct": 0.0,
        "answered": 0.0,
        "source_f1": 0.0,
        "tool_calls": 0,
        "malformed_tool_calls": 0,
        "nonexistent_ids": 0,
    }
    trajectory = art.Trajectory(
        messages_and_choices=[{"role": "user", "content": "q"}], metrics={**base, **metrics}
    )
    trajectory.reward = score(trajectory)
    return trajectory


def test_the_reward_terms_and_their_sum() -> None:
    assert {k: w for k, (w, _) in TERMS.items()} == {
        "correct_answer": 1.0, "right_sources": 0.25, "well_formed_calls": 0.15, "nonexistent_ids": 0.1,
    }  # fmt: skip
    perfect = _scored(correct=1, answered=1, source_f1=1, tool_calls=3)
    assert perfect.reward == pytest.approx(1.4)
    wrong = _scored(answered=1, source_f1=1, tool_calls=3)
    assert wrong.reward == pytest.approx(0.4)  # right sources, wrong answer: well below a right one
    assert _scored(correct=1, answered=1, tool_calls=3).reward == pytest.approx(1.15)  # no sources cited
    assert _scored(tool_calls=4, malformed_tool_calls=2).reward == 0.0  # calls but no final answer: nothing
    assert _scored().reward == 0.0  # no tool call at all
    made_up = _scored(answered=1, tool_calls=2, nonexistent_ids=5)
    assert made_up.reward == pytest.approx(0.15 - 0.3)  # the penalty stops at 3 ids


async def test_the_reward_type_gives_the_same_sum() -> None:
    group = art.TrajectoryGroup(
        [
            _scored(correct=1, answered=1, source_f1=1, tool_calls=3),
            _scored(answered=1, tool_calls=3, malformed_tool_calls=1, nonexistent_ids=1),
            _scored(),
        ]
    )
    scored = await email_reward().score_group(group)
    assert scored is not None
    assert [t.reward for t in scored.trajectories] == pytest.approx([score(t) for t in group.trajectories])


# ---------------------------------------------------------------- the rollout through a real client


def _tail(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The episode after the question (the expert's calls and results)."""
    last_user = max(i for i, m in enumerate(messages) if m["role"] == "user")
    return messages[last_user + 1 :]


def _expert_script(inbox: Inbox, q: Question, config: TaskConfig) -> Any:
    expert = expert_messages(inbox, q, config)
    opening = len(expert) - len(_tail(expert))
    calls = [m["tool_calls"][0]["function"] for m in _tail(expert) if m["role"] == "assistant"]

    def script(body: dict[str, Any]) -> dict[str, Any]:
        done = sum(1 for m in body["messages"][opening:] if m["role"] == "assistant")
        call = calls[done]
        return {"tool_calls": [(call["name"], json.loads(call["arguments"]))]}

    return script


async def test_the_expert_through_the_client_earns_the_full_reward(
    small: Inbox, scripted_server: Any, openai_client: Any
) -> None:
    q = next(q for q in small.questions("val") if q.kind == "thread")
    config = TaskConfig()
    scripted_server.script = _expert_script(small, q, config)
    trajectory = await rollout(
        openai_client, "agent-001", small, q, config=config, temperature=0.7, sample_seed=500
    )

    assert trajectory.reward == pytest.approx(1.4)
    m = trajectory.metrics
    assert (m["correct"], m["answered"], m["right_sources"], m["tool_calls"], m["turns"]) == (
        1.0,
        1.0,
        1.0,
        4,
        4,
    )
    assert (m["malformed_tool_calls"], m["any_malformed"], m["nonexistent_ids"]) == (0, 0.0, 0)
    assert m["found_source"] == m["read_source"] == 1.0 and m["reads"] == 2
    assert trajectory.num_trainable_turns() == 4 and trajectory.tools == TOOLS
    assert trajectory.metadata["end"] == "answered" and trajectory.metadata["answer"] == q.answer
    requests = scripted_server.requests
    assert [r["seed"] for r in requests] == [500, 501, 502, 503]
    first = requests[0]
    assert first["model"] == "agent-001" and first["tools"] == TOOLS and first["tool_choice"] == "auto"
    assert first["temperature"] == 0.7 and first["logprobs"] is True
    sent = first["messages"]
    assert sent[1 : 1 + len(example_messages())] == example_messages()  # the worked example, as context
    assert sent[-1] == {"role": "user", "content": "New question: " + q.text}
    trajectory.validate_for_record()


async def test_no_final_answer_scores_zero_and_says_why(
    small: Inbox, scripted_server: Any, openai_client: Any
) -> None:
    q = small.questions("train")[0]
    scripted_server.script = lambda body: {"content": "I think the answer is in your inbox."}
    chatty = await rollout(openai_client, "m", small, q, config=TaskConfig(max_turns=3))
    assert chatty.reward == 0.0 and chatty.metrics["correct"] == 0.0 and chatty.metrics["answered"] == 0.0
    assert (
        chatty.metrics["turns"] == 3
        and chatty.metrics["text_replies"] == 3
        and chatty.metrics["tool_calls"] == 0
    )
    assert (
        chatty.metadata["end"]
        == chatty.logs[-1]
        == "no final answer: 3 turn(s) without an accepted return_final_answer call"
    )
    assert [m["content"] for m in chatty.messages() if m["role"] == "user"][-2:] == [REMINDER, REMINDER]
    assert chatty.messages()[-1]["role"] == "assistant"  # no reminder after the last turn


async def test_malformed_calls_get_errors_and_count(
    small: Inbox, scripted_server: Any, openai_client: Any
) -> None:
    q = small.questions("train")[1]
    replies = iter(
        [
            {"tool_calls": [("search_inbox", {"keywords": "x"})]},  # unknown tool
            {"content": '<tool_call>\n{"name": "read_email", "arguments": {"id": 1'},  # unparseable block
            {"tool_calls": [("read_email", {"id": 999_999})]},  # a made-up id: well formed
            {"tool_calls": [("return_final_answer", {"answer": "no idea", "source_ids": [999_999]})]},
        ]
    )
    scripted_server.script = lambda body: next(replies)
    trajectory = await rollout(openai_client, "m", small, q, config=TaskConfig(few_shot=False))
    m = trajectory.metrics
    assert (m["tool_calls"], m["malformed_tool_calls"], m["any_malformed"], m["nonexistent_ids"]) == (
        4,
        2,
        1.0,
        2,
    )
    assert m["answered"] == 1.0 and m["correct"] == 0.0 and m["turns"] == 4
    tool_results = [msg["content"] for msg in trajectory.messages() if msg["role"] == "tool"]
    assert tool_results[0].startswith("error: unknown tool 'search_inbox'")
    assert tool_results[1] == "error: no email with id 999999 in this inbox"
    assert any(
        msg["role"] == "user" and msg["content"].startswith("error: your tool call could not be read")
        for msg in trajectory.messages()
    )
    assert trajectory.reward == pytest.approx(0.15 * (0.5 * 0.5 + 0.5) - 0.1 * 2)


async def test_scaffolding_prefilled_search_and_text_answers(
    small: Inbox, scripted_server: Any, openai_client: Any
) -> None:
    q = next(q for q in small.questions("train") if q.difficulty == "easy")
    config = TaskConfig(few_shot=False, prefill_search=True, accept_text_answer=True, tool_choice="required")
    scripted_server.script = lambda body: {"content": q.answer}
    trajectory = await rollout(openai_client, "m", small, q, config=config)
    assert trajectory.metrics["correct"] == 1.0 and trajectory.metrics["turns"] == 1
    assert trajectory.metrics["tool_calls"] == 0 and trajectory.metrics["source_f1"] == 0.0
    assert trajectory.reward == pytest.approx(1.0)  # no sources cited, no call made
    sent = scripted_server.requests[0]
    assert sent["tool_choice"] == "required"
    roles = [m["role"] for m in sent["messages"]]
    assert roles == ["system", "user", "assistant", "tool"]  # the search was made for the model
    assert sent["messages"][2]["tool_calls"][0]["function"]["arguments"] == json.dumps({"keywords": q.text})
    assert f"id: {q.answer_id} |" in sent["messages"][3]["content"]
    assert trajectory.num_trainable_turns() == 1  # the prefilled search is context


# ---------------------------------------------------------------- RULER


def _judge_script(body: dict[str, Any]) -> dict[str, Any]:
    """A judge that reads the expected answer from the rubric and scores 1 the trajectories that give it."""
    system, user = body["messages"][0]["content"], body["messages"][1]["content"]
    expected = re.search(r'The correct answer is "([^"]+)"', system).group(1)  # type: ignore[union-attr]
    blocks = re.findall(r'<trajectory id="([^"]+)">\n(.*?)\n</trajectory>', user, re.DOTALL)
    scores = [
        {
            "trajectory_id": tid,
            "explanation": "scripted",
            "score": 1.0 if json.dumps(expected)[1:-1] in text else 0.0,
        }
        for tid, text in blocks
    ]
    return {"content": json.dumps({"scores": scores})}


async def test_ruler_with_a_scripted_judge(
    small: Inbox, scripted_server: Any, openai_client: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ART_JUDGE_CACHE_DIR", str(tmp_path / "judge-cache"))
    q = small.questions("train")[2]
    config = TaskConfig(few_shot=False)
    scripted_server.script = _expert_script(small, q, config)
    right = await rollout(openai_client, "m", small, q, config=config)
    answers = iter(
        [{"tool_calls": [("return_final_answer", {"answer": "something else", "source_ids": [q.answer_id]})]}]
    )
    scripted_server.script = lambda body: next(answers)
    wrong = await rollout(openai_client, "m", small, q, config=config)
    assert right.reward > wrong.reward

    scripted_server.requests.clear()
    scripted_server.script = _judge_script
    base_url = str(openai_client.base_url).rstrip("/")
    judge = art.rewards.Judge(model="judge", base_url=base_url, api_key="k", timeout=10)
    group = art.TrajectoryGroup([wrong, right])
    scored = await email_reward(judge).score_group(group)
    assert scored is not None
    assert [t.metrics["ruler_score"] for t in scored.trajectories] == [0.0, 1.0]
    assert [t.reward for t in scored.trajectories] == pytest.approx([score(wrong), 1.0 + score(right)])
    asked = scripted_server.requests[0]
    assert asked["model"] == "judge"
    rubric = RUBRIC.format(answer=q.answer, sources=",".join(map(str, q.source_ids)))
    assert rubric in asked["messages"][0]["content"]
    scripted_server.script = lambda body: {"content": "I cannot judge this."}
    assert await email_reward(replace_judge(judge)).score_group(group) is None  # dropped, not raised


def replace_judge(judge: Any) -> Any:
    """The same judge under another name (so that the cache does not answer for it)."""
    return judge.model_copy(update={"model": "judge-2", "retry": art.rewards.RetryPolicy(max_attempts=1)})


# ---------------------------------------------------------------- bad input


def test_bad_input_is_one_clear_error(small: Inbox, tmp_path: Path) -> None:
    with pytest.raises(EmailAgentInputError, match=r"^seed: must be an integer from 0 to 999999, got -1$"):
        InboxConfig(seed=-1)
    with pytest.raises(
        EmailAgentInputError, match=r"^question id: 10000 is not in this inbox \(seed 3\); use 0 to \d+$"
    ):
        small.question(10_000)
    with pytest.raises(
        EmailAgentInputError,
        match=r"^database: no file at .*missing.sqlite; write one with `python -m art.examples.email_agent.inbox --out",
    ):
        Inbox.open(tmp_path / "missing.sqlite")
    (tmp_path / "junk.sqlite").write_text("not a database")
    with pytest.raises(EmailAgentInputError, match="is not an email-agent inbox"):
        Inbox.open(tmp_path / "junk.sqlite")
    with pytest.raises(
        EmailAgentInputError,
        match=r"^val_questions: the inbox .* has \d+ val questions, asked for 500; ask for at most \d+ or generate more emails per mailbox$",
    ):
        small.split("val", 500, "val_questions")
    with pytest.raises(EmailAgentInputError, match="emails_per_mailbox: must be at least 40"):
        InboxConfig(emails_per_mailbox=10)
    with pytest.raises(EmailAgentInputError, match="val_mailboxes"):
        InboxConfig(mailboxes=2, val_mailboxes=2)


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--seed", "-5"], "error: seed: must be an integer from 0 to 999999, got -5"),
        (["--explain", "99999"], "error: question id: 99999 is not in this inbox (seed 0); use 0 to "),
        (["--db", "/nonexistent/inbox.sqlite"], "error: database: no file at /nonexistent/inbox.sqlite;"),
        (
            ["--quick", "--val-questions", "400"],
            "error: val_questions: the inbox (seed 0, 2 mailboxes of 80 emails)",
        ),
        (["--group-size", "1"], "error: group_size: must be at least 2, got 1"),
        (["--steps", "many"], "error: argument --steps: invalid int value: 'many'"),
    ],
)
def test_the_train_script_answers_bad_input_in_one_line_and_exit_2(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    from art.examples.email_agent.train import main

    with pytest.raises(SystemExit) as exit_info:
        main(argv)
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith(message), err


def test_explain_prints_a_question_and_the_expert(capsys: pytest.CaptureFixture[str]) -> None:
    from art.examples.email_agent.train import main

    main(["--quick", "--explain", "0"])
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("question 0 (train, ") and out[1].startswith("answer: ")
    assert any(line.startswith("[assistant] return_final_answer(") for line in out)


async def test_prefilled_read_leaves_the_final_call_to_the_model(
    small: Inbox, scripted_server: Any, openai_client: Any
) -> None:
    q = next(
        q
        for q in small.questions("train")
        if len(q.source_ids) == 1 and small.search(q.mailbox, q.text)[0].id == q.answer_id
    )  # the question's own words find its email first: the prefilled read is the right one
    config = TaskConfig(prefill_search=True, prefill_read=True, tool_choice="required")
    expert = expert_messages(small, q, config)
    assert [c["function"]["name"] for m in _tail(expert) for c in m.get("tool_calls") or []] == [
        "search_emails",
        "read_email",
        "return_final_answer",
    ]  # fmt: skip  (the prefilled calls, then the expert's one)
    scripted_server.script = _expert_script(small, q, config)
    trajectory = await rollout(openai_client, "m", small, q, config=config)
    assert trajectory.reward == pytest.approx(1.4) and trajectory.num_trainable_turns() == 1
    assert trajectory.metrics["read_source"] == 1.0 and trajectory.metrics["tool_calls"] == 1
    sent = scripted_server.requests[0]["messages"]
    assert [m["role"] for m in sent[-4:]] == ["assistant", "tool", "assistant", "tool"]
    assert sent[-2]["tool_calls"][0]["function"]["arguments"] == json.dumps({"id": q.answer_id})
    with pytest.raises(ValueError, match="prefill_read needs prefill_search"):
        TaskConfig(prefill_read=True)


def test_the_command_line_builds_the_config() -> None:
    from art.examples.email_agent.rollout import SCAFFOLDS
    from art.examples.email_agent.train import EmailAgentConfig, parse_args

    config, explain_id = parse_args(["--scaffold", "read", "--steps", "3", "--sft-warmup", "--judge", "j"])
    assert explain_id is None and config.task == SCAFFOLDS["read"] and config.steps == 3
    assert config.sft_warmup and config.judge == "j" and config.base_model == "smollm2-135m"
    quick, _ = parse_args(["--quick", "--learning-rate", "2e-4"])
    assert quick == EmailAgentConfig.quick(learning_rate=2e-4) and quick.task == SCAFFOLDS["example"]
    recipe, _ = parse_args(["--recipe", "--seed", "2"])
    assert recipe == EmailAgentConfig.recipe(seed=2) and recipe.task == SCAFFOLDS["none"]
    assert recipe.sft_warmup and recipe.time_budget_minutes == 30 and recipe.steps == 1000
