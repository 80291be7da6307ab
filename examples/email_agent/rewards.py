"""Rewards of an email-agent episode, as `art.rewards.Reward` values that add up, and RULER with a rubric.

The hand-written terms read what the rollout recorded in `trajectory.metrics` (see rollout.py):

    term                weight  value
    correct_answer      1.0     1 when the final answer matches the expected one (`is_correct`)
    right_sources       0.25    F1 of the cited source ids against the question's source ids
    well_formed_calls   0.15    half for the share of tool calls that were well formed, half for having
                                called return_final_answer (0 without any tool call)
    nonexistent_ids     0.1     minus the number of ids read or cited that the mailbox lacks (at most 3)

so a right answer with the right sources in well-formed calls earns 1.4, any wrong answer at most 0.4,
and made-up ids cost up to 0.3. An episode that never calls return_final_answer within its turns scores 0
(the issue's rule: no answer, no credit), whatever its other calls were like. `score(trajectory)` is that sum (the rollout sets it as the reward);
`email_reward()` is the same sum as a `Reward`, and `email_reward(judge)` adds RULER: the judge ranks the
group's trajectories against `RUBRIC`, which states the expected answer and sources, so the judge
grades against the truth rather than its own guess.

`is_correct`: the answer, lower-cased, equals the expected one up to punctuation ("$1,234.50" and
"1234.50"), or holds it as a run of whole words ("Room B214" for "B214", but not "$145.00" for
"$45.00"), in at most `MAX_ANSWER_CHARS` characters, and holds none of `others` (hedging loses).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import Any

import art
from art.rewards import Reward, RulerReward, reward_fn

MAX_ANSWER_CHARS = 80
MAX_MISSING_IDS = 3


def _tokens(text: str) -> list[str]:
    return re.findall(r"[a-z0-9]+", text.lower())


def normalize(text: str) -> str:
    """Lower-case alphanumerics only: "SW-418." and "sw418" compare equal."""
    return "".join(_tokens(text))


def _holds(answer: str, expected: str) -> bool:
    got, want = _tokens(answer), _tokens(expected)
    if not want:
        return False
    if "".join(got) == "".join(want):
        return True
    return any(got[i : i + len(want)] == want for i in range(len(got) - len(want) + 1))


def is_correct(answer: str | None, expected: str, others: Sequence[str] = ()) -> bool:
    """Whether `answer` states `expected` (and none of `others`); see the module docstring."""
    if not answer or len(answer) > MAX_ANSWER_CHARS:
        return False
    if not _holds(answer, expected):
        return False
    return not any(_holds(answer, other) for other in others if normalize(other) != normalize(expected))


def source_f1(cited: Sequence[int], expected: Sequence[int]) -> float:
    """F1 of the cited ids against the expected ones (0 when either is empty)."""
    hits = len(set(cited) & set(expected))
    if not hits:
        return 0.0
    precision, recall = hits / len(set(cited)), hits / len(set(expected))
    return 2 * precision * recall / (precision + recall)


def _metric(trajectory: art.Trajectory, key: str) -> float:
    return float(trajectory.metrics.get(key, 0.0))


def correct_answer(trajectory: art.Trajectory) -> float:
    """1 when the final answer was right."""
    return _metric(trajectory, "correct")


def right_sources(trajectory: art.Trajectory) -> float:
    """F1 of the cited source ids (0 without a final answer)."""
    return _metric(trajectory, "source_f1")


def well_formed_calls(trajectory: art.Trajectory) -> float:
    """Half for the share of well-formed tool calls, half for having called return_final_answer."""
    calls = _metric(trajectory, "tool_calls")
    if not calls:
        return 0.0
    return 0.5 * (1.0 - _metric(trajectory, "malformed_tool_calls") / calls) + 0.5 * _metric(
        trajectory, "answered"
    )


def nonexistent_ids(trajectory: art.Trajectory) -> float:
    """Minus the number of ids read or cited that the mailbox lacks (at most `MAX_MISSING_IDS`)."""
    return -min(_metric(trajectory, "nonexistent_ids"), MAX_MISSING_IDS)


TERMS: dict[str, tuple[float, Callable[[art.Trajectory], float]]] = {
    "correct_answer": (1.0, correct_answer),
    "right_sources": (0.25, right_sources),
    "well_formed_calls": (0.15, well_formed_calls),
    "nonexistent_ids": (0.1, nonexistent_ids),
}
"""name -> (weight, function of a trajectory): the hand-written reward is their weighted sum."""


def score(trajectory: art.Trajectory) -> float:
    """The hand-written reward of a finished episode (what the rollout sets as `trajectory.reward`): 0 for an
    episode that never called return_final_answer (whatever its calls were like), else the terms' sum."""
    if not _metric(trajectory, "answered"):
        return 0.0
    return sum(weight * fn(trajectory) for weight, fn in TERMS.values())


RUBRIC = """\
The agent answers a question about its user's email inbox with three tools: search_emails, read_email and \
return_final_answer.
The correct answer is "{answer}", and it comes from the email(s) with id {sources}.
- Best: return_final_answer with the correct answer (a short string) and exactly those source ids.
- A wrong or missing answer scores low; among those, prefer trajectories that searched with sensible \
keywords and read the right email.
- Tool calls that failed (errors, made-up ids) and turns without a tool call make a trajectory worse.
- When the outcome is the same, fewer steps are better."""
"""RULER's plain-English rubric; the expected answer and source ids are filled in per group."""


class EmailRuler(Reward):  # type: ignore[misc,unused-ignore]  # (art is Any to mypy outside src)
    """RULER for the email agent: the rubric of each group states that group's expected answer and sources
    (read from the trajectories' metadata), then `art.rewards.ruler_score_group` ranks the group."""

    name = "ruler_score"

    def __init__(self, judge: Any, **options: Any) -> None:
        self.judge, self.options = judge, options

    def rubric(self, group: art.TrajectoryGroup) -> str:
        """The rubric for this group (all its trajectories answer the same question)."""
        first = group.trajectories[0].metadata
        return RUBRIC.format(answer=first.get("expected", "?"), sources=first.get("source_ids", "?"))

    async def score_group(self, group: art.TrajectoryGroup) -> art.TrajectoryGroup | None:
        """The group scored by the judge, or None when it cannot be (with `swallow_exceptions=True`)."""
        if not group.trajectories:
            return None
        return await RulerReward(self.judge, self.rubric(group), **self.options).score_group(group)

    def __repr__(self) -> str:
        return f"EmailRuler({self.judge!r})"


def email_reward(judge: Any = None, **ruler_options: Any) -> Reward:
    """The hand-written terms as one `Reward` (the same values as `score`), plus RULER when `judge` is
    given (a LiteLLM model string or an `art.rewards.Judge`); RULER drops a group it cannot score."""
    terms = [weight * reward_fn(fn, name=name) for name, (weight, fn) in TERMS.items()]
    total = terms[0]
    for term in terms[1:]:
        total = total + term
    if judge is not None:
        total = EmailRuler(judge, **{"swallow_exceptions": True, **ruler_options}) + total
    return total
