"""One email-agent episode through any OpenAI-compatible chat API, the scripted expert, and the scaffolding.

Each turn sends the conversation and `TOOLS`; the reply's `Choice` is appended (a trainable turn) and
every call in `message.tool_calls` runs on the store (`tools.run_tool`), its result going back as a
`{"role": "tool"}` message. The episode ends when `return_final_answer` is accepted, or after
`max_turns` model turns: then the reward is 0 for the answer and `trajectory.logs` and
`metadata["end"]` say why. A reply without a tool call gets a one-line reminder; a reply holding a
`<tool_call>` block the server could not parse (or cut by `max_tokens`) is a malformed call.

Scaffolding (`TaskConfig`), for models too small to start on their own (SmolLM2-135M never made a valid
tool call unaided in inbox QA, this task's predecessor):
- `few_shot`: a worked example (search, read, answer) as plain context before the question;
- `prefill_search`: the rollout makes the first search (the question as keywords) for the model;
- `prefill_read`: and reads its top hit too, so that the model's first own call can be the final answer;
- `accept_text_answer`: a plain-text reply counts as the final answer (citing no source);
- `tool_choice="required"`: the server constrains every reply to well-formed tool calls (a grammar).

`expert_messages(inbox, question)` is the scripted expert: the same opening, a search with the question's
keywords, a read of each source email in the order the search listed them, and `return_final_answer`
with the answer copied from the email and the source ids; a perfect tool-calling trajectory for SFT.

Metrics: correct, answered, right_sources (the exact set), source_f1, tool_calls (every call attempted,
malformed ones included), malformed_tool_calls, any_malformed (0/1), nonexistent_ids, text_replies,
searches, reads, found_source, read_source, turns.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Literal

import openai

import art

from .inbox import Email, Inbox, Question, SearchHit
from .rewards import is_correct, score, source_f1
from .tools import TOOLS, ToolOutcome, format_email, format_hits, run_tool

SYSTEM_PROMPT = (
    "You are {owner}'s email assistant. Answer the question with the tools: call search_emails with "
    "keywords from the question, read_email on the best result, then return_final_answer with a short "
    "answer copied from the email and the ids of the emails you used."
)
REMINDER = "Call a tool: search_emails, read_email or return_final_answer."
UNREADABLE = (
    'error: your tool call could not be read; write <tool_call>{"name": ..., "arguments": {...}}</tool_call> '
    "with valid JSON."
)


@dataclass(frozen=True)
class TaskConfig:
    """The episode's limits and scaffolding (see the module docstring); the defaults are the plain task
    with one worked example."""

    max_turns: int = 6
    max_results: int = 5
    max_tokens: int = 96
    few_shot: bool = True
    prefill_search: bool = False
    prefill_read: bool = False  # needs prefill_search
    accept_text_answer: bool = False
    tool_choice: Literal["auto", "required"] = "auto"

    def __post_init__(self) -> None:
        if self.max_turns < 1 or self.max_results < 1 or self.max_tokens < 8:
            raise ValueError("max_turns and max_results must be at least 1, max_tokens at least 8")
        if self.prefill_read and not self.prefill_search:
            raise ValueError("prefill_read needs prefill_search (it reads the prefilled search's top hit)")
        if self.tool_choice not in ("auto", "required"):
            raise ValueError(f"tool_choice must be 'auto' or 'required', got {self.tool_choice!r}")


SCAFFOLDS: dict[str, TaskConfig] = {
    "none": TaskConfig(few_shot=False),
    "example": TaskConfig(),
    "read": TaskConfig(prefill_search=True, prefill_read=True, tool_choice="required"),
}
"""Named scaffolding levels (`--scaffold` of train.py): none; the worked example; and the example with the
search and the read of its top hit made for the model and replies constrained to tool calls."""


def _call(call_id: str, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    """An assistant message making one tool call (plain context, as the chat template renders it)."""
    call = {"id": call_id, "type": "function", "function": {"name": name, "arguments": json.dumps(arguments)}}
    return {"role": "assistant", "content": None, "tool_calls": [call]}


def _result(call_id: str, content: str) -> dict[str, Any]:
    return {"role": "tool", "tool_call_id": call_id, "content": content}


EXAMPLE_QUESTION = "How much did the umbrella I ordered from Rainy Day Shop cost?"
_EXAMPLE_EMAIL = Email(
    812, "example", "Rainy Day Shop <orders@rainyday.example>", "you@example.com",
    "Order RD-40213 confirmed: umbrella", "2024-02-11",
    "Hi,\n\nThanks for shopping at Rainy Day Shop! Your order RD-40213 for a umbrella is confirmed.\n"
    "Total: $24.99\nEstimated delivery: 2024-02-15\n\nThe Rainy Day Shop team",
)  # fmt: skip
_EXAMPLE_HITS = [
    SearchHit(812, _EXAMPLE_EMAIL.sender, _EXAMPLE_EMAIL.subject, "2024-02-11",
              "... at Rainy Day Shop! Your order RD-40213 for a umbrella is ..."),
    SearchHit(455, "Rainy Day Shop <deals@rainyday.example>", "20% off this week", "2024-01-20",
              "... great prices on every umbrella and raincoat."),
]  # fmt: skip


def example_messages() -> list[dict[str, Any]]:
    """The worked example: search, read the top hit, answer with the amount and its source id. Its shop and
    item are in no generated inbox."""
    return [
        {"role": "user", "content": EXAMPLE_QUESTION},
        _call("example_1", "search_emails", {"keywords": "Rainy Day Shop umbrella"}),
        _result("example_1", format_hits(_EXAMPLE_HITS)),
        _call("example_2", "read_email", {"id": 812}),
        _result("example_2", format_email(_EXAMPLE_EMAIL)),
        _call("example_3", "return_final_answer", {"answer": "$24.99", "source_ids": [812]}),
        _result("example_3", "answer recorded"),
    ]


def first_messages(question: Question, config: TaskConfig) -> list[dict[str, Any]]:
    """The conversation before the model's first turn: system prompt, worked example, the question."""
    prefix = "New question: " if config.few_shot else ""
    return [
        {"role": "system", "content": SYSTEM_PROMPT.format(owner=question.owner)},
        *(example_messages() if config.few_shot else []),
        {"role": "user", "content": prefix + question.text},
    ]


def prefilled_calls(
    inbox: Inbox, question: Question, config: TaskConfig
) -> tuple[list[dict[str, Any]], list[ToolOutcome]]:
    """The calls the rollout makes for the model: with `prefill_search` a search with the question as
    keywords, with `prefill_read` a read of its top hit too. Their messages and outcomes."""
    messages: list[dict[str, Any]] = []
    outcomes: list[ToolOutcome] = []
    calls: list[tuple[str, dict[str, Any]]] = []
    if config.prefill_search:
        calls.append(("search_emails", {"keywords": question.text}))
    for name, arguments in calls:
        outcome = run_tool(inbox, question.mailbox, name, json.dumps(arguments), config.max_results)
        call_id = f"prefill_{len(outcomes) + 1}"
        messages += [_call(call_id, name, arguments), _result(call_id, outcome.content)]
        outcomes.append(outcome)
        if name == "search_emails" and config.prefill_read and outcome.hit_ids:
            calls.append(("read_email", {"id": outcome.hit_ids[0]}))
    return messages, outcomes


def expert_messages(
    inbox: Inbox, question: Question, config: TaskConfig | None = None
) -> list[dict[str, Any]]:
    """A perfect episode by the scripted expert, ending with its `return_final_answer` call (see the module
    docstring). With prefilled calls it continues from them: it searches again only if the prefilled
    search missed a source, and reads only the sources not read yet."""
    config = config or TaskConfig()
    prefill, outcomes = prefilled_calls(inbox, question, config)
    messages = first_messages(question, config) + prefill
    hits = outcomes[0].hit_ids if outcomes else []
    read = {o.read_id for o in outcomes}
    calls = 0

    def act(name: str, arguments: dict[str, Any]) -> ToolOutcome:
        nonlocal calls
        calls += 1
        call_id = f"call_{calls}"
        outcome = run_tool(inbox, question.mailbox, name, json.dumps(arguments), config.max_results)
        messages.append(_call(call_id, name, arguments))
        if name != "return_final_answer":
            messages.append(_result(call_id, outcome.content))
        return outcome

    if not set(question.source_ids) <= set(hits):
        hits = act("search_emails", {"keywords": question.keywords}).hit_ids
    for email_id in sorted(question.source_ids, key=lambda i: hits.index(i) if i in hits else len(hits)):
        if email_id not in read:
            act("read_email", {"id": email_id})
    act("return_final_answer", {"answer": question.answer, "source_ids": list(question.source_ids)})
    return messages


def expert_trajectory(inbox: Inbox, question: Question, config: TaskConfig | None = None) -> art.Trajectory:
    """The expert's episode as a trajectory for SFT (every assistant turn is a plain dict)."""
    return art.Trajectory(
        messages_and_choices=expert_messages(inbox, question, config),
        tools=TOOLS,
        reward=1.0,
        metadata={"question_id": question.id, "split": question.split, "teacher": "expert"},
    )


@dataclass
class _Episode:
    """What happened so far in an episode (becomes the metrics)."""

    tool_calls: int = 0
    malformed: int = 0
    missing_ids: list[int] = field(default_factory=list)
    text_replies: int = 0
    searches: int = 0
    reads: int = 0
    found_source: bool = False
    read_source: bool = False
    answer: str | None = None
    cited: list[int] = field(default_factory=list)
    answered: bool = False

    def add(self, name: str, outcome: ToolOutcome, question: Question) -> None:
        """Account for one executed call."""
        self.tool_calls += 1
        self.malformed += outcome.malformed
        self.missing_ids += outcome.missing_ids
        if outcome.malformed:
            return
        self.searches += name == "search_emails"
        self.reads += name == "read_email"
        self.found_source = self.found_source or bool(set(outcome.hit_ids) & set(question.source_ids))
        self.read_source = self.read_source or outcome.read_id == question.answer_id
        if outcome.final:
            self.answer, self.cited, self.answered = outcome.answer, outcome.source_ids, True


def _finish(trajectory: art.Trajectory, episode: _Episode, question: Question, turns: int) -> None:
    correct = is_correct(episode.answer, question.answer)
    trajectory.metrics = {
        "correct": float(correct),
        "answered": float(episode.answered),
        "right_sources": float(episode.answered and set(episode.cited) == set(question.source_ids)),
        "source_f1": source_f1(episode.cited, question.source_ids),
        "tool_calls": episode.tool_calls,
        "malformed_tool_calls": episode.malformed,
        "any_malformed": float(episode.malformed > 0),
        "nonexistent_ids": len(episode.missing_ids),
        "text_replies": episode.text_replies,
        "searches": episode.searches,
        "reads": episode.reads,
        "found_source": float(episode.found_source),
        "read_source": float(episode.read_source),
        "turns": turns,
    }
    trajectory.metadata.update(
        answer=episode.answer,
        cited=",".join(map(str, episode.cited)),
        end="answered" if episode.answered else "",
    )
    if not episode.answered:
        why = f"no final answer: {turns} turn(s) without an accepted return_final_answer call"
        trajectory.metadata["end"] = why
        trajectory.log(why)
    else:
        trajectory.log(
            f"answer {episode.answer!r} ({'right' if correct else 'wrong'}; expected {question.answer!r})"
        )
    trajectory.reward = score(trajectory)


async def rollout(
    client: openai.AsyncOpenAI,
    model_name: str,
    inbox: Inbox,
    question: Question,
    *,
    config: TaskConfig | None = None,
    temperature: float = 1.0,
    sample_seed: int | None = None,
) -> art.Trajectory:
    """Answer `question` with the tools and return the scored trajectory.

    sample_seed: when set, turn k is sampled with request seed `sample_seed + k` (reproducible held-out
    episodes; the base model and each checkpoint meet the same random draws).
    """
    config = config or TaskConfig()
    trajectory = art.Trajectory(
        messages_and_choices=first_messages(question, config),
        tools=TOOLS,
        metadata={
            "question_id": question.id,
            "split": question.split,
            "kind": question.kind,
            "difficulty": question.difficulty,
            "expected": question.answer,
            "source_ids": ",".join(map(str, question.source_ids)),
        },
    )
    episode = _Episode()
    prefill, outcomes = prefilled_calls(inbox, question, config)  # context, not trained
    trajectory.messages_and_choices += prefill
    for outcome in outcomes:
        episode.found_source = episode.found_source or bool(set(outcome.hit_ids) & set(question.source_ids))
        episode.read_source = episode.read_source or outcome.read_id == question.answer_id
    turns = 0
    while turns < config.max_turns and not episode.answered:
        response = await client.chat.completions.create(
            model=model_name,
            messages=trajectory.messages(),
            tools=TOOLS,  # type: ignore[arg-type]
            tool_choice=config.tool_choice,
            temperature=temperature,
            max_tokens=config.max_tokens,
            logprobs=True,
            seed=None if sample_seed is None else sample_seed + turns,
        )
        turns += 1
        choice = response.choices[0]
        trajectory.messages_and_choices.append(choice)
        calls: list[Any] = list(choice.message.tool_calls or [])
        if not calls:
            content, note = (choice.message.content or "").strip(), ""
            if "<tool_call>" in content or (choice.finish_reason == "length" and not content):
                episode.tool_calls += 1
                episode.malformed += 1
                note = UNREADABLE
            elif config.accept_text_answer and content:
                episode.answer, episode.answered = content, True
            else:
                episode.text_replies += 1
                note = REMINDER
            if not episode.answered and turns < config.max_turns:
                trajectory.messages_and_choices.append({"role": "user", "content": note})
            continue
        for call in calls:
            function = getattr(call, "function", None)
            name, arguments = (function.name, function.arguments) if function else ("?", "")
            outcome = run_tool(inbox, question.mailbox, name, arguments, config.max_results)
            episode.add(name, outcome, question)
            trajectory.messages_and_choices.append(_result(call.id, outcome.content))
            if outcome.final:
                break
    _finish(trajectory, episode, question, turns)
    return trajectory
