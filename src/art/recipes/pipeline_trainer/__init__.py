"""Asynchronous RL (the reference's `art.pipeline_trainer`): rollouts, training and evaluation overlap.

    from art.pipeline_trainer import PipelineTrainer, make_group_rollout_fn, keep_recent_and_top

See `trainer.py` for how the stages work and docs/pipeline.md for a walk-through.
"""

from art.recipes.pipeline_trainer.checkpoint_retention import (
    CHECKPOINT_CREATED_AT_METRIC,
    CHECKPOINT_EVAL_COMPLETED_METRIC,
    CHECKPOINT_SAVED_METRIC,
    CheckpointInfo,
    CheckpointRetentionContext,
    CheckpointRetentionStrategy,
    keep_recent_and_top,
)
from art.recipes.pipeline_trainer.status import StatusReporter
from art.recipes.pipeline_trainer.trainer import (
    AllRolloutsFailedError,
    PipelineTrainer,
    make_group_rollout_fn,
)
from art.recipes.pipeline_trainer.types import EvalFn, RolloutFn, ScenarioT, SingleRolloutFn

__all__ = [
    "CHECKPOINT_CREATED_AT_METRIC",
    "CHECKPOINT_EVAL_COMPLETED_METRIC",
    "CHECKPOINT_SAVED_METRIC",
    "AllRolloutsFailedError",
    "CheckpointInfo",
    "CheckpointRetentionContext",
    "CheckpointRetentionStrategy",
    "EvalFn",
    "PipelineTrainer",
    "RolloutFn",
    "ScenarioT",
    "SingleRolloutFn",
    "StatusReporter",
    "keep_recent_and_top",
    "make_group_rollout_fn",
]
