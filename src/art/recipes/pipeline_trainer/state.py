"""The state the stages of a `PipelineTrainer` share (policy version, scenario position, stop flag)."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field


@dataclass
class PipelineState:
    """Shared by the rollout, training and evaluation stages of one `PipelineTrainer.train()`."""

    policy_version: int = 0  # the newest step rollouts may start on
    next_training_step: int = 0  # the step being trained (policy_version + 1 while training)
    scenario_offset: int = 0  # scenarios taken from the iterator, counting those skipped on resume
    total_scenarios_consumed: int = 0
    last_eval_step: int = 0
    completed_eval_steps: set[int] = field(default_factory=set)
    discarded_stale_groups: int = 0
    policy_updated: asyncio.Condition = field(default_factory=asyncio.Condition)
    done: bool = False
