"""The MCP-RL rollout: one agent episode against a live MCP server, as a trainable `art.Trajectory`.

    traj = await art.mcp.rollout(model, McpScenario(task_description="...", server_params=server))

The loop, after the reference's MCP-RL example: connect (stdio or streamable HTTP), list the server's
tools and offer them to the model as OpenAI function tools together with `complete_task`; then, turn by
turn, ask the model (through `model.openai_client()`, so the sampled tokens and logprobs are kept),
run each tool call on the server and feed its result back as a `tool` message. The episode ends when the
model calls `complete_task`, answers without a tool call, or has used `max_turns` turns.

Failures, and who decides about them:
- a tool error (unknown tool, bad arguments, the tool raised, the tool took longer than the server's
  `timeout`) is fed back to the model as the tool's result ("Error: ..."), counted in the trajectory's
  metrics (`tool_errors`, `tool_timeouts`) and logged: the model may recover;
- a server that fails to start, closes the connection (crashes) or stops answering raises
  `McpServerError` (logged, with the trajectory so far attached), so that the group's exception budget
  (`gather_trajectory_groups(max_exceptions=...)`) decides; with `on_server_error="record"` the
  trajectory is returned instead, with `server_error` = 1 in its metrics;
- a request the model's server refuses (400, e.g. the context window is full) ends the episode, logged.
Every wait has a bound: the MCP server's `timeout` per request, `llm_timeout` per model turn.
"""

from __future__ import annotations

import json
import logging
from typing import Any, Literal

import openai
from mcp.shared.exceptions import MCPError
from openai.types.chat import ChatCompletionMessageFunctionToolCall
from pydantic import BaseModel, ConfigDict, Field, field_validator

from art.model import Model
from art.recipes.mcp_rl.connection import (
    REQUEST_TIMEOUT,
    McpServer,
    McpServerError,
    connect,
    describe_error,
    discover_tools,
    is_server_failure,
    tool_schemas,
)
from art.recipes.mcp_rl.default_tools import complete_task_tool
from art.trajectories import Trajectory

logger = logging.getLogger("art.mcp")

SYSTEM_PROMPT = (
    "You are an agent that works through the tools of an MCP (Model Context Protocol) server. Use the "
    "tools to complete the user's task. You have {max_turns} turns. When the task is done, call "
    "`complete_task` with a summary of what you found or did; call it on its own, not together with "
    "other tools."
)
USER_PROMPT = "Please complete this task: {task}"


class McpScenario(BaseModel):
    """One task for the agent and the server to do it on (the reference example's `McpScenario`).

    `server_params` is an `art.mcp.McpServer`, the SDK's `StdioServerParameters`, or a URL.

    Example:
        server = McpServer.stdio(sys.executable, "-m", "my_server")
        scenario = McpScenario(task_description="Find the cheapest flight to Oslo.", server_params=server)
        trajectory = await art.mcp.rollout(model, scenario)
    """

    model_config = ConfigDict(arbitrary_types_allowed=True)

    task_description: str = Field(min_length=1)
    server_params: McpServer
    max_turns: int = Field(default=10, ge=1)
    difficulty: int | None = None

    @field_validator("server_params", mode="before")
    @classmethod
    def _server(cls, value: Any) -> McpServer:
        return McpServer.coerce(value)


class McpRolloutConfig(BaseModel):
    """How the agent is sampled and how failures are handled (defaults in one place).

    Example:
        config = McpRolloutConfig(temperature=0.7, max_tokens=1024, on_server_error="record")
        trajectory = await rollout(model, scenario, config=config)
    """

    model_config = ConfigDict(extra="forbid")

    temperature: float = Field(default=1.0, ge=0, le=2)
    max_tokens: int = Field(default=512, ge=1, description="Tokens per model turn.")
    llm_timeout: float = Field(default=600.0, gt=0, description="Seconds one model turn may take.")
    max_tool_result_chars: int = Field(
        default=4000,
        ge=100,
        description="Longer tool results are cut (with a note) before the model sees them.",
    )
    system_prompt: str | None = Field(
        default=None, description="Replaces SYSTEM_PROMPT; '{max_turns}' is filled in if present."
    )
    tool_choice: str | None = Field(
        default=None,
        description="Sent as tool_choice when set ('required' forces a tool call where supported).",
    )
    parallel_tool_calls: bool | None = Field(
        default=None,
        description="Sent when set: False asks for at most one tool call per turn (with tool_choice "
        "'required', exactly one: a small model otherwise writes calls until max_tokens cuts them).",
    )
    on_server_error: Literal["raise", "record"] = "raise"


def _content_text(result: Any) -> str:
    """The text of a CallToolResult: text blocks joined, other blocks as their JSON, structured content last."""
    parts: list[str] = []
    for block in getattr(result, "content", None) or []:
        text = getattr(block, "text", None)
        parts.append(
            text if isinstance(text, str) else json.dumps(block.model_dump(mode="json"), default=str)
        )
    if not parts and getattr(result, "structured_content", None) is not None:
        parts.append(json.dumps(result.structured_content, default=str))
    return "\n".join(parts)


def _cut(text: str, limit: int) -> tuple[str, bool]:
    if len(text) <= limit:
        return text, False
    return text[:limit] + f"\n... [cut: {len(text) - limit} more characters]", True


class _Episode:
    """The mutable state of one rollout: the trajectory and its counters."""

    def __init__(self, scenario: McpScenario, config: McpRolloutConfig) -> None:
        self.scenario = scenario
        self.config = config
        self.trajectory = Trajectory(
            messages_and_choices=[],
            metadata={"task": scenario.task_description, "server": scenario.server_params.label},
            metrics={
                "task_completed": False,
                "ran_out_of_turns": False,
                "num_turns": 0,
                "tool_calls": 0,
                "tool_errors": 0,
                "tool_timeouts": 0,
                "server_error": False,
            },
        )
        if scenario.difficulty is not None:
            self.trajectory.metadata["difficulty"] = scenario.difficulty

    def count(self, key: str) -> None:
        self.trajectory.metrics[key] = int(self.trajectory.metrics[key]) + 1

    def note(self, message: str, level: int = logging.INFO) -> None:
        """A line in the trajectory's logs and in the `art.mcp` logger."""
        self.trajectory.log(message)
        logger.log(level, "%s [task: %.60s]", message, self.scenario.task_description)


async def _run_tool(episode: _Episode, client: Any, name: str, raw_arguments: str) -> str:
    """Run one tool call on the server; tool-level failures come back as "Error: ..." text."""
    try:
        arguments = json.loads(raw_arguments) if raw_arguments.strip() else {}
    except json.JSONDecodeError as exc:
        episode.count("tool_errors")
        episode.note(f"tool error: {name} arguments are not JSON ({exc.msg}): {raw_arguments[:200]!r}")
        return f"Error: the arguments are not valid JSON ({exc.msg})"
    if not isinstance(arguments, dict):
        episode.count("tool_errors")
        episode.note(f"tool error: {name} arguments are not a JSON object: {raw_arguments[:200]!r}")
        return "Error: the arguments must be a JSON object"
    try:
        result = await client.call_tool(
            name, arguments, read_timeout_seconds=episode.scenario.server_params.timeout
        )
    except MCPError as exc:
        if exc.code == REQUEST_TIMEOUT:
            episode.count("tool_errors")
            episode.count("tool_timeouts")
            timeout = episode.scenario.server_params.timeout
            episode.note(f"tool timeout: {name} gave no answer within {timeout:g} s", logging.WARNING)
            return f"Error: the tool {name} did not answer within {timeout:g} seconds"
        if is_server_failure(exc):
            raise
        episode.count("tool_errors")
        episode.note(f"tool error: {name}: {describe_error(exc)}")
        return f"Error: {exc.message}"
    text = _content_text(result)
    if getattr(result, "is_error", False):
        episode.count("tool_errors")
        episode.note(f"tool error: {name}({raw_arguments[:200]}): {text[:300]}")
        return text if text.startswith("Error") else f"Error: {text}"
    text, was_cut = _cut(text, episode.config.max_tool_result_chars)
    if was_cut:
        episode.note(f"tool result of {name} cut to {episode.config.max_tool_result_chars} characters")
    return text


async def _agent_loop(episode: _Episode, model: Model, client: Any, tools: list[dict[str, Any]]) -> None:
    config, scenario, trajectory = episode.config, episode.scenario, episode.trajectory
    llm = model.openai_client()
    extra: dict[str, Any] = {"tool_choice": config.tool_choice} if config.tool_choice else {}
    if config.parallel_tool_calls is not None:
        extra["parallel_tool_calls"] = config.parallel_tool_calls
    while int(trajectory.metrics["num_turns"]) < scenario.max_turns:
        episode.count("num_turns")
        try:
            response = await llm.chat.completions.create(
                model=model.get_inference_name(),
                messages=trajectory.messages(),
                tools=tools,  # type: ignore[arg-type]
                temperature=config.temperature,
                max_tokens=config.max_tokens,
                logprobs=True,
                timeout=config.llm_timeout,
                **extra,
            )
        except openai.BadRequestError as exc:
            episode.note(
                f"the model's server refused turn {trajectory.metrics['num_turns']}: {exc}", logging.WARNING
            )
            return
        choice = response.choices[0]
        trajectory.messages_and_choices.append(choice)
        calls = [
            c for c in choice.message.tool_calls or [] if isinstance(c, ChatCompletionMessageFunctionToolCall)
        ]
        if not calls:
            episode.note(f"turn {trajectory.metrics['num_turns']}: no tool call; the episode ends")
            return
        finished = False
        for call in calls:
            episode.count("tool_calls")
            name, raw = call.function.name, call.function.arguments or ""
            if name == complete_task_tool.name:
                finished = True
                trajectory.metrics["task_completed"] = True
                try:
                    summary = json.loads(raw).get("summary", "") if raw.strip() else ""
                except (json.JSONDecodeError, AttributeError):
                    summary = raw
                trajectory.metadata["summary"] = str(summary)[:2000]
                episode.note(f"complete_task: {str(summary)[:300]}")
                continue
            content = await _run_tool(episode, client, name, raw)
            trajectory.messages_and_choices.append(
                {"role": "tool", "tool_call_id": call.id, "content": content}
            )
        if finished:
            return
    trajectory.metrics["ran_out_of_turns"] = True


async def rollout(
    model: Model,
    scenario: McpScenario,
    debug: bool = False,
    *,
    config: McpRolloutConfig | None = None,
) -> Trajectory:
    """Run `scenario` with `model` against its MCP server; see the module docstring.

    The trajectory's metrics: task_completed, ran_out_of_turns, num_turns, tool_calls, tool_errors,
    tool_timeouts, server_error. Its reward is 0: score groups with `art.rewards.ruler_score_group`.

    Example:
        group = art.TrajectoryGroup(art.mcp.rollout(model, scenario) for _ in range(4))
        groups = await art.gather_trajectory_groups([group])
    """
    config = config or McpRolloutConfig()
    episode = _Episode(scenario, config)
    trajectory = episode.trajectory
    server = scenario.server_params
    try:
        async with connect(server) as client:
            tools = [*tool_schemas(await discover_tools(client, server)), complete_task_tool.to_tool_schema()]
            trajectory.tools = tools
            system = (config.system_prompt or SYSTEM_PROMPT).replace("{max_turns}", str(scenario.max_turns))
            trajectory.messages_and_choices = [
                {"role": "system", "content": system},
                {"role": "user", "content": USER_PROMPT.format(task=scenario.task_description)},
            ]
            if debug:
                print(f"[mcp] {server.label}: tools {[t['function']['name'] for t in tools]}")
            await _agent_loop(episode, model, client, tools)
    except Exception as exc:
        if not (isinstance(exc, McpServerError) or is_server_failure(exc)):
            raise
        trajectory.metrics["server_error"] = True
        message = (
            str(exc)
            if isinstance(exc, McpServerError)
            else f"the MCP server {server.label} failed mid-rollout: {describe_error(exc)}"
        )
        episode.note(f"server error: {message}", logging.WARNING)
        if config.on_server_error == "raise":
            raise McpServerError(message, trajectory=trajectory) from exc
    if debug:
        for item in trajectory.messages():
            print(f"[mcp] {item}")
    return trajectory
