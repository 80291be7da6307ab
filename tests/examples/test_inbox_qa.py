"""Inbox QA: the generator, the SQLite FTS5 tools, answer scoring, and the rollout through a real client."""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

import pytest
from art.examples.inbox_qa.env import (
    KINDS,
    TOOLS,
    InboxConfig,
    InboxDB,
    InboxScenario,
    is_correct,
    make_inbox,
    run_tool,
    train_scenarios,
    val_scenarios,
)
from art.examples.inbox_qa.rollout import REMINDER, example_messages, rollout


def test_generator_is_seeded_and_puts_the_answer_in_the_target_only() -> None:
    config = InboxConfig(num_emails=10, num_distractors=2)
    assert make_inbox(5, config) == make_inbox(5, config)
    assert make_inbox(5, config) != make_inbox(6, config)
    kinds = set()
    for seed in range(60):
        inbox = make_inbox(seed, config)
        q = inbox.question
        kinds.add(q.kind)
        assert [e.id for e in inbox.emails] == list(range(1, 11))
        assert [e.date for e in inbox.emails] == sorted(e.date for e in inbox.emails)
        holders = [e.id for e in inbox.emails if q.answer in e.body or q.answer in e.sender]
        assert holders == [q.target_id], (seed, q)
        assert len(q.distractor_answers) == 2 and q.answer not in q.distractor_answers
    assert kinds == set(KINDS)


def test_keyword_in_question_switch() -> None:
    for seed in range(20):
        with_kw = make_inbox(seed, InboxConfig(keyword_in_question=True))
        alias = make_inbox(seed, InboxConfig(keyword_in_question=False))
        target = next(e for e in with_kw.emails if e.id == with_kw.question.target_id)
        assert with_kw.question.answer == alias.question.answer
        assert with_kw.question.text != alias.question.text
        # the alias question names the entity by words that its email never uses
        extra = set(alias.question.text.lower().rstrip("?").split()) - set(
            with_kw.question.text.lower().split()
        )
        assert extra and not any(w in (target.subject + " " + target.body).lower().split() for w in extra)


def test_splits_are_disjoint() -> None:
    assert not {s.seed for s in train_scenarios(100)} & {s.seed for s in val_scenarios(100)}
    with pytest.raises(ValueError):
        train_scenarios(10, start=999_995)


def test_search_read_and_answer_tools_against_the_database() -> None:
    config = InboxConfig(num_emails=12, num_distractors=2, kinds=("order",))
    inbox = make_inbox(3, config)
    q = inbox.question
    target = next(e for e in inbox.emails if e.id == q.target_id)
    item = target.subject.removeprefix("Your ").removesuffix(" has shipped")
    db = InboxDB(inbox.emails)
    try:
        hits = db.search(f"tracking number for my {item}?!")  # punctuation must not break FTS5
        assert hits and hits[0]["id"] == q.target_id
        assert q.answer in hits[0]["snippet"]
        assert db.search("the my what") == []  # only stop words
        assert db.search("zzzz") == []
        assert db.search("shipped", snippets=False)[0].keys() == {"id", "from", "subject", "date"}
        assert db.read(q.target_id) == target and db.read(999) is None

        found = run_tool(db, "search_emails", json.dumps({"query": item}), config)
        assert found.ok and q.target_id in found.found_ids
        read = run_tool(db, "read_email", json.dumps({"id": str(q.target_id)}), config)
        assert read.ok and read.read_id == q.target_id and json.loads(read.content)["body"] == target.body
        answered = run_tool(db, "answer", json.dumps({"text": q.answer}), config)
        assert answered.answer == q.answer and is_correct(answered.answer, q)
        for name, args in [
            ("read_email", "{}"),
            ("search_emails", "not json"),
            ("delete", "{}"),
            ("answer", "[1]"),
        ]:
            bad = run_tool(db, name, args, config)
            assert not bad.ok and bad.content.startswith("error")
    finally:
        db.close()


def test_answer_scoring() -> None:
    q = make_inbox(1, InboxConfig(kinds=("flight",), num_distractors=1)).question
    number = q.answer  # e.g. SW418
    assert is_correct(number, q)
    assert is_correct(f"Your flight number is {number.lower()}.", q)
    assert is_correct(f"{number[:2]}-{number[2:]}", q)
    assert not is_correct(None, q) and not is_correct("", q) and not is_correct("I don't know", q)
    assert not is_correct(f"{number} or {q.distractor_answers[0]}", q)  # hedging loses
    assert not is_correct(number + " " + "x" * 300, q)  # essays lose


def test_tool_schemas_are_openai_functions() -> None:
    assert [t["function"]["name"] for t in TOOLS] == ["search_emails", "read_email", "answer"]
    for tool in TOOLS:
        assert tool["type"] == "function" and tool["function"]["parameters"]["type"] == "object"


def _solver(inbox: Any, final: str) -> Any:
    """A scripted agent: search with the question, read the target, answer `final`."""

    def script(body: dict[str, Any]) -> dict[str, Any]:
        messages = body["messages"]
        asked = max(
            i for i, m in enumerate(messages) if m["role"] == "user" and inbox.question.text in m["content"]
        )
        assistant_turns = sum(1 for m in messages[asked:] if m["role"] == "assistant")
        if assistant_turns == 0:
            return {"tool_calls": [("search_emails", {"query": inbox.question.text})]}
        if assistant_turns == 1:
            return {
                "content": "Let me read it.",
                "tool_calls": [("read_email", {"id": inbox.question.target_id})],
            }
        return {"tool_calls": [("answer", {"text": final})]}

    return script


MEDIUM = InboxConfig.preset("medium")


async def test_rollout_solves_with_tools_through_the_openai_client(
    scripted_server: Any, openai_client: Any
) -> None:
    scenario = InboxScenario(seed=11, split="val")
    inbox = make_inbox(scenario.seed, MEDIUM)
    scripted_server.script = _solver(inbox, f"It is {inbox.question.answer}")

    trajectory = await rollout(openai_client, "agent-001", scenario, config=MEDIUM, temperature=0.7)

    assert trajectory.reward == 1.0
    assert trajectory.metrics["correct"] == 1.0 and trajectory.metrics["turns"] == 3
    assert trajectory.metrics["found_target"] == 1.0 and trajectory.metrics["read_target"] == 1.0
    assert trajectory.num_trainable_turns() == 3 and trajectory.tools == TOOLS
    request = scripted_server.requests[-1]
    assert request["model"] == "agent-001" and request["tools"] == TOOLS and request["temperature"] == 0.7
    sent, example = request["messages"], example_messages(MEDIUM)
    assert sent[1 : 1 + len(example)] == example  # the worked example (search, read, answer), as context
    assert [m["role"] for m in example] == [
        "user",
        "assistant",
        "tool",
        "assistant",
        "tool",
        "assistant",
        "tool",
    ]
    episode = sent[1 + len(example) :]
    assert episode[0] == {"role": "user", "content": "New question: " + inbox.question.text}
    assert [m["role"] for m in episode] == ["user", "assistant", "tool", "assistant", "tool"]
    calls = [m for m in episode if m["role"] == "assistant"]
    tools = [m for m in episode if m["role"] == "tool"]
    assert [t["tool_call_id"] for t in tools] == [c["tool_calls"][0]["id"] for c in calls]
    assert json.loads(tools[1]["content"])["id"] == inbox.question.target_id
    trajectory.validate_for_record()
    again = type(trajectory).model_validate(trajectory.model_dump(mode="json"))
    assert again.num_trainable_turns() == 3


async def test_easy_default_prefills_the_search_and_accepts_text(
    scripted_server: Any, openai_client: Any
) -> None:
    scenario = InboxScenario(seed=2)
    inbox = make_inbox(scenario.seed)
    scripted_server.script = lambda body: {"content": inbox.question.answer}
    trajectory = await rollout(openai_client, "m", scenario)
    assert trajectory.reward == 1.0 and trajectory.metrics["turns"] == 1
    assert trajectory.metrics["valid_tool_calls"] == 0 and trajectory.metrics["found_target"] == 0.0
    sent = scripted_server.requests[0]["messages"]
    assert sent[-3]["content"] == "New question: " + inbox.question.text
    assert sent[-2]["tool_calls"][0]["function"]["name"] == "search_emails"  # made for the model
    hits = json.loads(sent[-1]["content"])
    assert sent[-1]["role"] == "tool" and hits[0]["id"] == inbox.question.target_id
    assert inbox.question.answer in hits[0]["snippet"] or inbox.question.answer in hits[0]["from"]
    assert example_messages()[-1] == {"role": "assistant", "content": "QX123456"}

    scripted_server.script = lambda body: {"content": "I am not sure."}
    wrong = await rollout(openai_client, "m", scenario)
    assert wrong.reward == pytest.approx(0.1) and wrong.metrics["answered"] == 1.0


async def test_rollout_partial_credit_and_turn_limit(scripted_server: Any, openai_client: Any) -> None:
    scenario = InboxScenario(seed=4)
    inbox = make_inbox(scenario.seed, MEDIUM)
    scripted_server.script = _solver(inbox, "no idea")
    wrong = await rollout(openai_client, "m", scenario, config=MEDIUM)
    assert wrong.metrics["correct"] == 0.0 and wrong.reward == pytest.approx(0.4)
    strict = await rollout(openai_client, "m", scenario, config=replace(MEDIUM, partial_credit=False))
    assert strict.reward == 0.0

    scripted_server.script = lambda body: {"content": "The answer is 42."}
    chatty = await rollout(openai_client, "m", scenario, config=replace(MEDIUM, max_turns=3))
    assert chatty.reward == 0.0 and chatty.metrics["turns"] == 3 and chatty.metrics["answered"] == 0.0
    assert [m["content"] for m in chatty.messages() if m["role"] == "user"][-2:] == [REMINDER, REMINDER]
    bare = await rollout(openai_client, "m", scenario, config=replace(MEDIUM, few_shot=False, max_turns=1))
    assert [m["role"] for m in bare.messages()] == ["system", "user", "assistant"]
    assert bare.messages()[1]["content"] == inbox.question.text
