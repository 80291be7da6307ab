"""Asynchronous RL (the reference's `art.pipeline_trainer`): rollouts, training and evaluation overlap.

    from art.pipeline_trainer import PipelineTrainer, make_group_rollout_fn, keep_recent_and_top

See `trainer.py` for how the stages work and docs/pipeline.md for a walk-through.
"""

from art.recipes.pipeline_trainer import checkpoint_retention
from art.recipes.pipeline_trainer.checkpoint_retention import *  # noqa: F403  (every name of its __all__)
from art.recipes.pipeline_trainer.status import StatusReporter
from art.recipes.pipeline_trainer.trainer import (
    AllRolloutsFailedError,
    PipelineTrainer,
    make_group_rollout_fn,
)
from art.recipes.pipeline_trainer.types import EvalFn, RolloutFn, ScenarioT, SingleRolloutFn

__all__ = [
    "AllRolloutsFailedError",
    "EvalFn",
    "PipelineTrainer",
    "RolloutFn",
    "ScenarioT",
    "SingleRolloutFn",
    "StatusReporter",
    "make_group_rollout_fn",
]
__all__ += checkpoint_retention.__all__
