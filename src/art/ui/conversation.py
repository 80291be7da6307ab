"""A recorded trajectory (its JSON, as written) turned into what a person reads: chat turns with readable tool
calls (name, arguments, call id) and results (each named by the call it answers), and for each sampled turn its tokens with the sampled logprob and, where the trainer
recorded them, its own logprob, the importance ratio and whether the token was trained.

Shared by the web pages (`art ui`) and the terminal (`art show`), so both say the same thing.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from typing import Any

from art.record.step_record import STATUS_TEXT, TrainedTrajectory, TrainedTurn, judge_explanation

Json = dict[str, Any]


@dataclass
class Token:
    text: str
    sampled_logprob: float | None
    trainer_logprob: float | None = None
    ratio: float | None = None
    trained: bool | None = None  # None: the trainer recorded nothing for this turn


@dataclass
class ToolCall:
    name: str
    arguments: str  # pretty JSON when it parses, else as written
    id: str = ""


@dataclass
class Turn:
    """One message of a conversation; `tokens` only for sampled turns (a Choice with logprobs)."""

    role: str
    content: str
    tool_calls: list[ToolCall] = field(default_factory=list)
    tool_call_id: str = ""
    name: str = ""  # a tool result's: the message's own, else the name of the call it answers
    sampled: bool = False
    finish_reason: str = ""
    tokens: list[Token] = field(default_factory=list)

    def who(self, sep: str = " · ", answers: str = "result of ") -> str:
        """The turn's heading: its role, then its name and the id of the call it answers (a tool result's),
        joined by `sep`; `answers` goes before that id."""
        parts = [self.role, self.name, answers + self.tool_call_id if self.tool_call_id else ""]
        return sep.join(part for part in parts if part)


@dataclass
class TrajectoryView:
    """Everything a page shows about one trajectory."""

    reward: float | None
    advantage: (
        float | None
    )  # None: not recorded (a held-out split, or a record older than the trainer's file)
    status: str  # what became of it in training, in words ("" when not recorded)
    metrics: Json
    metadata: Json
    logs: list[str]
    explanation: str | None
    histories: list[list[Turn]]  # [main conversation, additional histories...]
    tools: list[str]

    @property
    def messages(self) -> list[Turn]:
        return self.histories[0] if self.histories else []


def _text(content: Any) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):  # content parts
        return "".join(str(p.get("text", "")) if isinstance(p, dict) else str(p) for p in content)
    return json.dumps(content)


def _pretty(arguments: Any) -> str:
    if not isinstance(arguments, str):
        return json.dumps(arguments, indent=1)
    try:
        return json.dumps(json.loads(arguments), indent=1, ensure_ascii=False)
    except ValueError:
        return arguments


def _finite(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) and math.isfinite(value) else None


def _turn(item: Any, trained: TrainedTurn | None, tokens: bool = True) -> Turn:
    if not isinstance(item, dict):
        return Turn(role="?", content=f"(not a message: {str(item)[:200]})")
    is_choice = "message" in item and "finish_reason" in item and "role" not in item
    message = item.get("message") if is_choice else item
    if not isinstance(message, dict):
        message = {}
    calls = [
        ToolCall(
            str((c.get("function") or {}).get("name", "?")),
            _pretty((c.get("function") or {}).get("arguments")),
            str(c.get("id") or ""),
        )
        for c in message.get("tool_calls") or []
        if isinstance(c, dict)
    ]
    turn = Turn(
        role=str(message.get("role", "assistant" if is_choice else "?")),
        content=_text(message.get("content")),
        tool_calls=calls,
        tool_call_id=str(message.get("tool_call_id") or ""),
        name=str(message.get("name") or ""),
        sampled=is_choice,
        finish_reason=str(item.get("finish_reason") or "") if is_choice else "",
    )
    content = ((item.get("logprobs") or {}).get("content") or []) if is_choice and tokens else []
    for j, entry in enumerate(content):
        if not isinstance(entry, dict):
            continue
        token = Token(str(entry.get("token", "")), _finite(entry.get("logprob")))
        if trained is not None and j < len(trained.trained):
            token.trained = trained.trained[j]
            token.trainer_logprob = trained.trainer_logprob[j] if j < len(trained.trainer_logprob) else None
            token.ratio = trained.ratio[j] if j < len(trained.ratio) else None
        turn.tokens.append(token)
    return turn


def _name_results(turns: list[Turn]) -> list[Turn]:
    """Give each tool result without a name the name of the call it answers (matched by call id), so that a
    reader sees `search_emails` on the result and not only an id such as `call_6995fc55`."""
    names: dict[str, str] = {}
    for turn in turns:
        names.update((c.id, c.name) for c in turn.tool_calls if c.id)
        if turn.tool_call_id and not turn.name:
            turn.name = names.get(turn.tool_call_id, "")
    return turns


def view(trajectory: Json, trained: TrainedTrajectory | None, *, tokens: bool = True) -> TrajectoryView:
    """The readable form of one trajectory dict, with the trainer's record of it (or None); `tokens=False`
    skips the per-token lists (for summaries)."""
    turns = {(t.history, t.item): t for t in (trained.turns if trained else [])}
    histories = [trajectory.get("messages_and_choices") or []]
    histories += [h.get("messages_and_choices") or [] for h in trajectory.get("additional_histories") or []]
    logs = [str(line) for line in trajectory.get("logs") or []]
    tools = [
        str((t.get("function") or {}).get("name", "?"))
        for t in trajectory.get("tools") or []
        if isinstance(t, dict)
    ]
    return TrajectoryView(
        reward=_finite(trajectory.get("reward")),
        advantage=trained.advantage if trained else None,
        status=STATUS_TEXT.get(trained.status, trained.status) if trained else "",
        metrics=dict(trajectory.get("metrics") or {}),
        metadata=dict(trajectory.get("metadata") or {}),
        logs=logs,
        explanation=judge_explanation(logs),
        histories=[
            _name_results([_turn(item, turns.get((h, i)), tokens) for i, item in enumerate(items)])
            for h, items in enumerate(histories)
        ],
        tools=tools,
    )


def scenario_key(group: Json, index: int) -> str:
    """What identifies a group's scenario across steps: its (or its first trajectory's) `scenario_id`, else the
    first user message, else its position."""
    for metadata in (
        group.get("metadata") or {},
        *((t.get("metadata") or {}) for t in group["trajectories"][:1]),
    ):
        for key in ("scenario_id", "scenario"):
            if metadata.get(key) not in (None, ""):
                return f"{key}={metadata[key]}"
    for t in group["trajectories"][:1]:
        for item in t.get("messages_and_choices") or []:
            if isinstance(item, dict) and item.get("role") == "user":
                return _text(item.get("content"))[:300]
    return f"group {index}"


def mean_reward(group: Json) -> float | None:
    """The mean reward of a group's trajectories (None when it has none)."""
    rewards = [r for t in group["trajectories"] if (r := _finite(t.get("reward"))) is not None]
    return sum(rewards) / len(rewards) if rewards else None
