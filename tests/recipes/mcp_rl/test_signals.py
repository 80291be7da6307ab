"""`art.mcp.tool_use_signal`: a rollout scored from its own metrics, no judge."""

from __future__ import annotations

import pytest

import art
from art.mcp import tool_use_signal


def rollout_with(**metrics: object) -> art.Trajectory:
    return art.Trajectory(messages_and_choices=[], metrics=metrics)


@pytest.mark.parametrize(
    ("metrics", "expected"),
    [
        ({"task_completed": True, "tool_calls": 4, "tool_errors": 0}, 1.0),
        ({"task_completed": True, "tool_calls": 4, "tool_errors": 1}, 0.875),
        ({"task_completed": False, "tool_calls": 4, "tool_errors": 4}, 0.0),
        ({"task_completed": False, "tool_calls": 2, "tool_errors": 1}, 0.25),
        ({"task_completed": True, "tool_calls": 0, "tool_errors": 0}, 0.5),  # finished without a call
        ({}, 0.0),  # not an MCP rollout: nothing to reward
    ],
)
def test_finished_tasks_and_valid_calls_score_higher(metrics: dict[str, object], expected: float) -> None:
    assert tool_use_signal(rollout_with(**metrics)) == pytest.approx(expected)


def test_more_failed_calls_never_score_higher() -> None:
    scores = [
        tool_use_signal(rollout_with(task_completed=False, tool_calls=3, tool_errors=e)) for e in range(4)
    ]
    assert scores == sorted(scores, reverse=True) and scores[0] > scores[-1]
