"""Checks shared by the compatibility tests: which step produced each sampled turn."""

from __future__ import annotations

from openai.types.chat.chat_completion import Choice

import art


def choice_steps(groups: list[art.TrajectoryGroup]) -> list[int | None]:
    """The `checkpoint_step` ART's server reported for every sampled turn of every trajectory."""
    steps: list[int | None] = []
    for group in groups:
        for trajectory in group.trajectories:
            for item in trajectory.messages_and_choices:
                if isinstance(item, Choice):
                    steps.append((item.model_extra or {}).get("checkpoint_step"))
    return steps


def rewards(groups: list[art.TrajectoryGroup]) -> list[float]:
    return [t.reward for g in groups for t in g.trajectories]
