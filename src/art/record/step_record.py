"""What the trainer recorded about one RL step, beside its trajectories: the trainer's side of the record.

Per trajectory: its advantage and what became of it (trained, or dropped and why). Per trained turn (a Choice):
for each of its sampled tokens (`logprobs.content[j]`), whether it was trained, the trainer's logprob of it
and the importance ratio `exp(trainer - sampled)` the loss used. Per step: the trained tokens' statistics.

On disk it sits beside the step's groups, never inside them (the groups stay exactly as the user logged them):
`trajectories/train/{step:04d}.trainer.jsonl`, one `StepTrainerRecord` per line, one line per training call
that ended at that step (usually one). Its groups are matched to the step's group lines by content
(`group_fingerprint`), so the order the groups are logged in does not matter. A record written before this
file existed simply has none: readers show advantages as "not recorded".

A leaf module (pydantic only), so the client, the trainer and `art ui` all read the same shapes.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from typing import Literal

from pydantic import BaseModel, Field

TrajectoryStatus = Literal["trained", "zero_advantage", "no_trainable_turn", "too_long", "unaligned"]

STATUS_TEXT: dict[str, str] = {
    "trained": "trained",
    "zero_advantage": "not trained: advantage 0 (its group's rewards were all equal, or it scored the mean)",
    "no_trainable_turn": "not trained: no trainable turn (no Choice with logprobs)",
    "too_long": "not trained: longer than max_seq_len",
    "unaligned": "not trained: its logprobs did not line up with its tokens",
}

# RULER writes its reasons into a trajectory's logs as lines starting with this (see art.rewards.ruler).
JUDGE_EXPLANATION_PREFIX = "RULER explanation"

# Significant digits kept of the trainer's float32 values (float32 holds about 7): nothing is lost.
_DIGITS = 7


def rounded(value: float | None) -> float | None:
    """`value` rounded to the record's precision; None for None and non-finite values (JSON has no NaN)."""
    if value is None or not math.isfinite(value):
        return None
    return float(f"{value:.{_DIGITS}g}")


class TrainedTurn(BaseModel):
    """The trainer's view of one sampled turn: lists aligned with the Choice's `logprobs.content`."""

    history: int = Field(default=0, description="0: the main conversation; k: additional_histories[k - 1].")
    item: int = Field(description="Index of the Choice in that history's messages_and_choices.")
    trained: list[bool] = Field(default_factory=list, description="Whether each token was in the loss.")
    trainer_logprob: list[float | None] = Field(default_factory=list)
    ratio: list[float | None] = Field(default_factory=list, description="Importance ratio the loss used.")


class TrainedTrajectory(BaseModel):
    """One trajectory as the trainer saw it."""

    advantage: float
    status: TrajectoryStatus
    trained_tokens: int = 0
    turns: list[TrainedTurn] = Field(default_factory=list)


class TrainedGroup(BaseModel):
    """One group of a training call, its trajectories in the group's order."""

    index: int = Field(description="Position of the group among those passed to train().")
    fingerprint: str = Field(
        default="", description="`storage.group_fingerprint` of the group (matches its line)."
    )
    trajectories: list[TrainedTrajectory] = Field(default_factory=list)


class TokenStats(BaseModel):
    """Statistics of the step's trained tokens (None where there were none)."""

    trained_tokens: int = 0
    positive_advantage_tokens: int = 0
    negative_advantage_tokens: int = 0
    sampled_logprob_mean: float | None = None
    trainer_logprob_mean: float | None = None
    logprob_diff_abs_mean: float | None = None
    logprob_diff_abs_max: float | None = None
    ratio_mean: float | None = None
    ratio_min: float | None = None
    ratio_max: float | None = None
    clipped_fraction: float | None = None

    @classmethod
    def of(
        cls,
        tokens: Iterable[tuple[float, float, float, float]],
        clip_low: float,
        clip_high: float,
    ) -> TokenStats:
        """From `(advantage, sampled logprob, trainer logprob, ratio)` of every trained token."""
        rows = list(tokens)
        if not rows:
            return cls()
        n = len(rows)
        diffs = [abs(t - s) for _, s, t, _ in rows]
        ratios = [r for *_, r in rows]
        return cls(
            trained_tokens=n,
            positive_advantage_tokens=sum(1 for a, *_ in rows if a > 0),
            negative_advantage_tokens=sum(1 for a, *_ in rows if a < 0),
            sampled_logprob_mean=rounded(math.fsum(s for _, s, _, _ in rows) / n),
            trainer_logprob_mean=rounded(math.fsum(t for _, _, t, _ in rows) / n),
            logprob_diff_abs_mean=rounded(math.fsum(diffs) / n),
            logprob_diff_abs_max=rounded(max(diffs)),
            ratio_mean=rounded(math.fsum(ratios) / n),
            ratio_min=rounded(min(ratios)),
            ratio_max=rounded(max(ratios)),
            clipped_fraction=rounded(sum(1 for r in ratios if r < clip_low or r > clip_high) / n),
        )


class StepTrainerRecord(BaseModel):
    """What one training call recorded (one line of `{step:04d}.trainer.jsonl`).

    Example:
        record = result.trainer_record            # on the TrainResult of backend.train(...)
        record.groups[0].trajectories[2].advantage
    """

    step: int = Field(
        default=-1, description="The step the call's groups are logged at (the TrainResult's step)."
    )
    updated: bool = Field(description="Whether an optimiser step was taken.")
    loss_fn: str = ""
    importance_sampling_level: str = ""
    scale_rewards: bool = True
    clip_range: tuple[float, float] = (0.0, 0.0)
    token_stats: TokenStats = Field(default_factory=TokenStats)
    groups: list[TrainedGroup] = Field(default_factory=list)


def judge_explanation(logs: Sequence[str]) -> str | None:
    """The judge's reasons written into a trajectory's logs (by RULER), joined by newlines; None if none.

    Example:
        >>> judge_explanation(["RULER explanation: reached the goal in two calls"])
        'reached the goal in two calls'
    """
    found = [line for line in logs if isinstance(line, str) and line.startswith(JUDGE_EXPLANATION_PREFIX)]
    if not found:
        return None
    # "RULER explanation: why" -> "why"; with several judges keep who said it: "(judge, ...): why"
    return "\n".join(line[len(JUDGE_EXPLANATION_PREFIX) :].lstrip(": ").strip() for line in found)
