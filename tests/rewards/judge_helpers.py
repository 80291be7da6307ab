"""Small builders shared by the rewards tests."""

from __future__ import annotations

from typing import Any

import art
from art.rewards import RetryPolicy

# Retries in tests wait milliseconds, not seconds.
FAST_RETRY = RetryPolicy(initial_delay=0.01, max_delay=0.05, jitter=0)

SYSTEM = {"role": "system", "content": "You are a careful assistant. SHARED-SYSTEM-PROMPT"}
USER = {"role": "user", "content": "What is 2+2? SHARED-USER-TASK"}


def conversation(answer: str) -> list[dict[str, Any]]:
    """A trajectory's messages: the shared system+user prefix, then its own answer."""
    return [SYSTEM, USER, {"role": "assistant", "content": answer}]


def group_of(*answers: str, rewards: list[float] | None = None, **traj_fields: Any) -> art.TrajectoryGroup:
    """A group whose trajectories share the prefix and differ by their answers."""
    rewards = rewards if rewards is not None else [0.0] * len(answers)
    return art.TrajectoryGroup(
        art.Trajectory(messages_and_choices=conversation(a), reward=r, **traj_fields)
        for a, r in zip(answers, rewards, strict=True)
    )
