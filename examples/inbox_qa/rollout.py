"""One inbox question answered by a model with tools, through any OpenAI-compatible chat API.

Each turn sends the conversation and `TOOLS`; the reply's `Choice` is appended (a trainable turn); every
tool call in `message.tool_calls` is executed against the inbox's SQLite database and its result goes
back as `{"role": "tool", "tool_call_id": ..., "content": ...}`. The episode ends when the model calls
`answer`, or after `config.max_turns` model turns. With `config.few_shot` (default) the conversation
opens with one worked example (search with the question's words, read the top hit, answer) as plain
context. With `config.prefill_search` the rollout itself makes the first search (with the question as
the query) and shows its result before the model's first turn: scaffolding for models too small to
start on their own. A reply without tool calls gets a one-line reminder
(or, with `accept_text_answer`, counts as the answer).

Reward:
- 1.0 when the answer is correct (`env.is_correct`);
- otherwise, with `partial_credit` (default), the sum of: 0.1 if the model made at least one valid tool
  call, 0.1 if a search returned the target email, 0.1 if it read the target email, 0.1 if it called
  `answer` at all. At most 0.4, always below a correct answer; set `partial_credit=False` for 0/1.

Metrics: correct, answered, valid_tool_calls, invalid_tool_calls, found_target, read_target, turns.
"""

from __future__ import annotations

import json
from typing import Any

import openai

import art

from .env import (
    TOOLS,
    InboxConfig,
    InboxDB,
    InboxScenario,
    is_correct,
    make_inbox,
    run_tool,
)

SYSTEM_PROMPT = (
    "You answer questions about Sam's email inbox. Call search_emails with keywords from the question, "
    "read_email to read a result, then answer with the short answer."
)
REMINDER = "Use a tool: search_emails, read_email, or answer."


def _call(call_id: str, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    return {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "id": call_id,
                "type": "function",
                "function": {"name": name, "arguments": json.dumps(arguments)},
            }
        ],
    }


def example_messages(config: InboxConfig | None = None) -> list[dict[str, Any]]:
    """A worked example as plain context, shaped like the episode `config` asks for.

    Search with the question's words; then, if the search shows snippets and a plain-text answer is
    accepted, answer in plain text; otherwise read the top hit and call `answer`. Its inbox is
    hand-written and its entity ("umbrella") is in no generated inbox.
    """
    config = config or InboxConfig()
    question = "What is the tracking number for my umbrella?"
    header = {
        "id": 3,
        "from": "Harbor Supply <orders@harborsupply.example>",
        "subject": "Your umbrella has shipped",
        "date": "2024-02-11",
    }
    body = "Hi Sam,\n\nGood news: your umbrella from Harbor Supply is on its way.\nTracking number: QX123456"
    hit = (
        {**header, "snippet": "...is on its way.\nTracking number: QX123456..."}
        if config.snippet_in_search
        else header
    )
    messages = [
        {"role": "user", "content": question},
        _call("example_1", "search_emails", {"query": question}),
        {"role": "tool", "tool_call_id": "example_1", "content": json.dumps([hit])},
    ]
    if config.snippet_in_search and config.accept_text_answer:
        return [*messages, {"role": "assistant", "content": "QX123456"}]
    return [
        *messages,
        _call("example_2", "read_email", {"id": 3}),
        {"role": "tool", "tool_call_id": "example_2", "content": json.dumps({**header, "body": body})},
        _call("example_3", "answer", {"text": "QX123456"}),
        {"role": "tool", "tool_call_id": "example_3", "content": "answer recorded"},
    ]


async def rollout(
    client: openai.AsyncOpenAI,
    model_name: str,
    scenario: InboxScenario,
    *,
    config: InboxConfig | None = None,
    temperature: float = 1.0,
    max_tokens: int = 64,
) -> art.Trajectory:
    """Answer the scenario's question with the tools and return the scored trajectory."""
    config = config or InboxConfig()
    inbox = make_inbox(scenario.seed, config)
    question = inbox.question
    db = InboxDB(inbox.emails)
    trajectory = art.Trajectory(
        messages_and_choices=[
            {"role": "system", "content": SYSTEM_PROMPT},
            *(example_messages(config) if config.few_shot else []),
            {"role": "user", "content": ("New question: " if config.few_shot else "") + question.text},
        ],
        tools=TOOLS,
        metadata={"seed": scenario.seed, "split": scenario.split, "kind": question.kind},
    )
    if config.prefill_search:  # scaffolding: the first search is made for the model (context, not trained)
        query = {"query": question.text}
        prefilled = run_tool(db, "search_emails", json.dumps(query), config)
        trajectory.messages_and_choices.append(_call("prefill_1", "search_emails", query))
        trajectory.messages_and_choices.append(
            {"role": "tool", "tool_call_id": "prefill_1", "content": prefilled.content}
        )
    answer: str | None = None
    answered = found = read = False
    valid = invalid = turns = 0
    try:
        while turns < config.max_turns and not answered:
            turns += 1
            response = await client.chat.completions.create(
                model=model_name,
                messages=trajectory.messages(),
                tools=TOOLS,  # type: ignore[arg-type]
                temperature=temperature,
                max_tokens=max_tokens,
                logprobs=True,
            )
            choice = response.choices[0]
            trajectory.messages_and_choices.append(choice)
            calls: list[Any] = list(choice.message.tool_calls or [])
            if not calls:
                if config.accept_text_answer and choice.message.content:
                    answer, answered = choice.message.content.strip(), True
                elif turns < config.max_turns:
                    trajectory.messages_and_choices.append({"role": "user", "content": REMINDER})
                continue
            for call in calls:
                function = getattr(call, "function", None)
                if function is None:  # a custom (non-function) tool call: not ours
                    invalid += 1
                    continue
                result = run_tool(db, function.name, function.arguments, config)
                valid, invalid = valid + result.ok, invalid + (not result.ok)
                found = found or question.target_id in result.found_ids
                read = read or result.read_id == question.target_id
                trajectory.messages_and_choices.append(
                    {"role": "tool", "tool_call_id": call.id, "content": result.content}
                )
                if result.answer is not None and not answered:
                    answer, answered = result.answer, True
    finally:
        db.close()
    correct = is_correct(answer, question)
    if correct:
        trajectory.reward = 1.0
    elif config.partial_credit:
        trajectory.reward = 0.1 * ((valid > 0) + found + read + answered)
    else:
        trajectory.reward = 0.0
    trajectory.metrics = {
        "correct": float(correct),
        "answered": float(answered),
        "valid_tool_calls": valid,
        "invalid_tool_calls": invalid,
        "found_target": float(found),
        "read_target": float(read),
        "turns": turns,
    }
    trajectory.metadata["answer"] = answer
    trajectory.metadata["expected"] = question.answer
    return trajectory
