"""Label-free measures of an MCP rollout, read from the metrics `art.mcp.rollout` records.

No judge and no answer key needed: whether the episode ended with `complete_task`, and what share of
its tool calls the server accepted. `tool_use_signal` is a `Reward` (art.rewards) that is still callable on
one trajectory: the MCP-RL example adds it, weighted, to RULER's scores (`RulerReward(...) + 0.2 *
tool_use_signal`), so that a group the judge scores alike still teaches valid calls and finished tasks.
"""

from __future__ import annotations

from art.rewards.reward import reward_fn
from art.trajectories import Trajectory


@reward_fn(name="tool_use_signal")
def tool_use_signal(trajectory: Trajectory) -> float:
    """0..1: half for ending on `complete_task`, half for the share of tool calls that did not fail.

    An episode without a tool call gets nothing for calls. Reads the metrics `task_completed`,
    `tool_calls` and `tool_errors` (absent ones count as 0).

    Example:
        config = RulerTrainingConfig(shaping=0.2 * art.mcp.tool_use_signal)
    """
    completed = 1.0 if trajectory.metrics.get("task_completed") else 0.0
    calls = float(trajectory.metrics.get("tool_calls", 0) or 0)
    errors = float(trajectory.metrics.get("tool_errors", 0) or 0)
    valid_share = max(0.0, calls - errors) / calls if calls > 0 else 0.0
    return 0.5 * completed + 0.5 * valid_share
