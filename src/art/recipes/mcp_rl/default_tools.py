"""The tool every MCP-RL agent gets besides the server's own: `complete_task`, which ends the episode."""

from __future__ import annotations

from art.recipes.mcp_rl.types import MCPTool

complete_task_tool = MCPTool(
    name="complete_task",
    description="Finish the task: call this once, when done, with a summary of what you accomplished.",
    parameters={
        "type": "object",
        "properties": {"summary": {"type": "string", "description": "Summary of accomplishments"}},
        "required": ["summary"],
    },
)
"""Calling it ends a rollout; its `summary` is what the judge reads as the agent's report."""
