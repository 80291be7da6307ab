"""MCP-RL: teach a model to use any MCP server's tools, with scenarios generated from its tool list.

The reference's names: `MCPTool`, `MCPResource`, `GeneratedScenario`, `GeneratedScenarioCollection`,
`complete_task_tool`, `generate_scenarios`. Beyond them, what the reference leaves to each example:
`McpServer` and `list_tools_and_resources` (reaching a server with the official SDK, stdio or streamable
HTTP) and `rollout` / `McpScenario` / `McpRolloutConfig` (the agent loop). Those need the `mcp` extra
(`pip install 'agent-reinforcement-trainer[mcp]'`) and load on first use. `tool_use_signal` scores a
rollout without a judge (finished task, valid tool calls).

    import art.mcp
    server = art.mcp.McpServer.stdio(sys.executable, "-m", "art.examples.mcp_rl.server")
    tools, resources = await art.mcp.list_tools_and_resources(server)
    scenarios = await art.mcp.generate_scenarios(tools, resources, num_scenarios=24)
    traj = await art.mcp.rollout(model, art.mcp.McpScenario(task_description=scenarios[0].task, server_params=server))
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from art.recipes.mcp_rl.default_tools import complete_task_tool
from art.recipes.mcp_rl.generate_scenarios import generate_scenarios
from art.recipes.mcp_rl.signals import tool_use_signal
from art.recipes.mcp_rl.types import GeneratedScenario, GeneratedScenarioCollection, MCPResource, MCPTool

if TYPE_CHECKING:
    from art.recipes.mcp_rl.connection import McpServer, McpServerError, connect, list_tools_and_resources
    from art.recipes.mcp_rl.episode import McpRolloutConfig, McpScenario, rollout

_LAZY = {
    "McpServer": "connection",
    "McpServerError": "connection",
    "connect": "connection",
    "list_tools_and_resources": "connection",
    "McpRolloutConfig": "episode",
    "McpScenario": "episode",
    "rollout": "episode",
}

__all__ = [
    "GeneratedScenario",
    "GeneratedScenarioCollection",
    "MCPResource",
    "MCPTool",
    "McpRolloutConfig",
    "McpScenario",
    "McpServer",
    "McpServerError",
    "complete_task_tool",
    "connect",
    "generate_scenarios",
    "list_tools_and_resources",
    "rollout",
    "tool_use_signal",
]


def __getattr__(name: str) -> Any:
    # The SDK-backed parts load on first use, so `art.mcp`'s types work without the `mcp` extra.
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'art.mcp' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value
    return value
