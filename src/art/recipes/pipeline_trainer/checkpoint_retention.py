"""Which checkpoints a `PipelineTrainer` keeps: strategies over the checkpoints it may delete.

A strategy gets only the checkpoints ART may remove (never the newest step, one a rollout or an evaluation
still uses, or a KL reference) and returns the steps of those to keep; the rest are deleted.

    trainer = PipelineTrainer(..., checkpoint_retention_strategy=keep_recent_and_top(recent=3, top=2))
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from datetime import datetime

from pydantic import BaseModel, Field

CHECKPOINT_CREATED_AT_METRIC = "checkpoint/created_at_unix"
CHECKPOINT_EVAL_COMPLETED_METRIC = "checkpoint/eval_completed"
CHECKPOINT_SAVED_METRIC = "checkpoint/saved"


class CheckpointInfo(BaseModel):
    """One checkpoint a strategy may delete: its step, folder, age, and the metrics logged at its step."""

    step: int
    path: str
    created_at: datetime
    is_eval_step: bool = False
    metrics: dict[str, float] = Field(default_factory=dict)


class CheckpointRetentionContext(BaseModel):
    """What a strategy decides on: the current step and the checkpoints it may delete."""

    current_step: int
    checkpoints: list[CheckpointInfo] = Field(default_factory=list)


CheckpointRetentionStrategy = Callable[[CheckpointRetentionContext], Iterable[int]]
"""Returns the steps to keep among `context.checkpoints`; every other one is deleted."""


def keep_recent_and_top(
    *, recent: int = 5, top: int = 2, metric: str = "val/reward"
) -> CheckpointRetentionStrategy:
    """Keep the `recent` newest deletable checkpoints and the `top` best by `metric` (higher is better;
    a tie keeps the later step). Checkpoints without the metric only count as recent.

    Example:
        >>> from datetime import datetime
        >>> cps = [CheckpointInfo(step=s, path="", created_at=datetime.now(), metrics={"val/reward": r})
        ...        for s, r in [(1, 0.9), (2, 0.1), (3, 0.2), (4, 0.3)]]
        >>> sorted(keep_recent_and_top(recent=1, top=1)(CheckpointRetentionContext(current_step=5, checkpoints=cps)))
        [1, 4]
    """
    if recent < 0:
        raise ValueError(f"keep_recent_and_top: recent must be >= 0, got {recent}")
    if top < 0:
        raise ValueError(f"keep_recent_and_top: top must be >= 0, got {top}")

    def strategy(context: CheckpointRetentionContext) -> set[int]:
        by_step = sorted(context.checkpoints, key=lambda c: c.step)
        keep = {c.step for c in by_step[len(by_step) - recent :]} if recent else set()
        scored = sorted(
            (c for c in context.checkpoints if metric in c.metrics),
            key=lambda c: (c.metrics[metric], c.step),
            reverse=True,
        )
        keep.update(c.step for c in scored[:top])
        return keep

    return strategy


__all__ = [
    "CHECKPOINT_CREATED_AT_METRIC",
    "CHECKPOINT_EVAL_COMPLETED_METRIC",
    "CHECKPOINT_SAVED_METRIC",
    "CheckpointInfo",
    "CheckpointRetentionContext",
    "CheckpointRetentionStrategy",
    "keep_recent_and_top",
]
