"""The MCP rollout against the shipped server started as a real subprocess: discovery and schema
conversion, a multi-turn episode with real tool calls and real state, tool errors, a hanging tool, a
crashing server, a server that never starts; the agent is a scripted OpenAI-compatible model over HTTP."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
from typing import Any

import pytest
from art.examples.mcp_rl.mailbox import build_mailbox
from scripted_llm import ScriptedLLM

import art
from art.mcp import (
    McpRolloutConfig,
    McpScenario,
    McpServer,
    McpServerError,
    list_tools_and_resources,
    rollout,
)
from art.openai_server.protocol import check_tool


def agent_model(llm: ScriptedLLM) -> art.Model:
    return art.Model(
        name="agent", project="mcp-tests", inference_base_url=llm.base_url, inference_api_key="k"
    )


def scripted(*turns: Any) -> Any:
    """An agent that plays `turns` in order; each is a reply dict or a function of the request body."""
    queue = list(turns)

    def handler(body: dict[str, Any]) -> Any:
        turn = queue.pop(0)
        return turn(body) if callable(turn) else turn

    return handler


def last_tool_json(body: dict[str, Any]) -> Any:
    return json.loads(body["messages"][-1]["content"])


async def test_discovery_converts_every_tool_to_an_openai_schema(mailbox: McpServer) -> None:
    tools, resources = await list_tools_and_resources(mailbox)
    names = {t.name for t in tools}
    assert names == {"search_emails", "read_email", "list_folder", "move_email", "folder_counts"}
    read = next(t for t in tools if t.name == "read_email").to_tool_schema()
    assert read["type"] == "function" and read["function"]["name"] == "read_email"
    assert read["function"]["description"] == "Read one email in full by its id."
    params = read["function"]["parameters"]
    assert params["type"] == "object" and params["required"] == ["email_id"]
    assert params["properties"]["email_id"]["type"] == "integer"
    for tool in tools:  # our own OpenAI-compatible server accepts every converted schema
        check_tool(tool.to_tool_schema(), 0)
    assert [r.uri for r in resources] == ["mailbox://folders"]


async def test_a_multi_turn_episode_uses_the_server_and_its_state(
    mailbox: McpServer, llm: ScriptedLLM
) -> None:
    _, facts = build_mailbox(0)
    wifi = next(f for f in facts if f.kind == "wifi")
    llm.on(
        "agent",
        scripted(
            {"tool_calls": [("search_emails", {"query": f"wifi {wifi.entity}"})]},
            lambda body: {"tool_calls": [("read_email", {"email_id": last_tool_json(body)[0]["id"]})]},
            lambda body: {
                "tool_calls": [
                    ("move_email", {"email_id": last_tool_json(body)["id"], "folder": "important"})
                ]
            },
            {"tool_calls": [("folder_counts", {})]},
            lambda body: {
                "tool_calls": [("complete_task", {"summary": f"counts: {body['messages'][-1]['content']}"})]
            },
        ),
    )
    scenario = McpScenario(task_description=wifi.question, server_params=mailbox, max_turns=8)
    trajectory = await rollout(agent_model(llm), scenario)

    metrics = trajectory.metrics
    assert metrics["task_completed"] and not metrics["ran_out_of_turns"] and not metrics["server_error"]
    assert (metrics["num_turns"], metrics["tool_calls"], metrics["tool_errors"]) == (5, 5, 0)
    tool_results = [m["content"] for m in trajectory.messages() if m["role"] == "tool"]
    assert len(tool_results) == 4
    read = json.loads(tool_results[1])
    assert read["id"] == wifi.email_id and wifi.answer in read["body"]  # the server's real data
    assert json.loads(tool_results[3])["important"] == 1  # the move changed the server's state
    assert trajectory.metadata["summary"].startswith("counts:")
    assert trajectory.num_trainable_turns() == 5
    assert [t["function"]["name"] for t in trajectory.tools or []][-1] == "complete_task"
    # The model saw each tool result before its next turn, and the tools on every turn.
    requests = llm.requests_for("agent")
    assert len(requests) == 5 and all(len(r["tools"]) == 6 for r in requests)
    assert requests[2]["messages"][-1]["role"] == "tool" and requests[0]["logprobs"] is True


async def test_tool_choice_and_parallel_tool_calls_are_sent_when_set(
    mailbox: McpServer, llm: ScriptedLLM
) -> None:
    llm.on(
        "agent", scripted({"tool_calls": [("complete_task", {"summary": "done"})]}, {"content": "no tools"})
    )
    scenario = McpScenario(task_description="say done", server_params=mailbox)
    config = McpRolloutConfig(tool_choice="required", parallel_tool_calls=False)
    assert (await rollout(agent_model(llm), scenario, config=config)).metrics["task_completed"]
    await rollout(agent_model(llm), scenario)  # the defaults send neither
    forced, free = llm.requests_for("agent")
    assert (forced["tool_choice"], forced["parallel_tool_calls"]) == ("required", False)
    assert "tool_choice" not in free and "parallel_tool_calls" not in free


async def test_tool_errors_are_fed_back_counted_and_logged(
    mailbox: McpServer, llm: ScriptedLLM, caplog: pytest.LogCaptureFixture
) -> None:
    llm.on(
        "agent",
        scripted(
            {"tool_calls": [("read_email", {"email_id": 999}), ("no_such_tool", {})]},
            {"tool_calls": [("move_email", "{not json")]},
            {"tool_calls": [("list_folder", {"folder": "spam"})]},
            {"content": "I give up."},
        ),
    )
    caplog.set_level("INFO", logger="art.mcp")
    trajectory = await rollout(
        agent_model(llm), McpScenario(task_description="tidy up", server_params=mailbox)
    )
    assert trajectory.metrics["tool_errors"] == 4 and trajectory.metrics["tool_calls"] == 4
    assert not trajectory.metrics["task_completed"] and trajectory.metrics["num_turns"] == 4
    results = [m["content"] for m in trajectory.messages() if m["role"] == "tool"]
    assert all(r.startswith("Error") for r in results), results
    assert "no email with id 999" in results[0] and "no_such_tool" in results[1]
    assert "not valid JSON" in results[2] and "unknown folder 'spam'" in results[3]
    assert sum("tool error" in line for line in trajectory.logs) == 4
    assert sum("tool error" in r.getMessage() for r in caplog.records) == 4
    assert "no tool call" in trajectory.logs[-1]


async def test_a_hanging_tool_times_out_then_a_crash_raises_with_the_trajectory(
    faulty_mailbox: McpServer, llm: ScriptedLLM
) -> None:
    llm.on(
        "agent",
        scripted(
            {"tool_calls": [("slow_tool", {"seconds": 600})]},
            {"tool_calls": [("folder_counts", {})]},
            {"tool_calls": [("crash_server", {})]},
            {"tool_calls": [("complete_task", {"summary": "never reached"})]},
        ),
    )
    started = time.monotonic()
    with pytest.raises(McpServerError, match="failed mid-rollout") as info:
        await rollout(agent_model(llm), McpScenario(task_description="x", server_params=faulty_mailbox))
    assert time.monotonic() - started < 60  # one 3-second tool timeout, not the tool's 600 s
    trajectory = info.value.trajectory
    assert trajectory.metrics["server_error"] and trajectory.metrics["tool_timeouts"] == 1
    results = [m["content"] for m in trajectory.messages() if m["role"] == "tool"]
    assert "did not answer within 3 seconds" in results[0]
    assert json.loads(results[1])["inbox"] == 30  # the server lived on after the timed-out call
    assert any("server error" in line for line in trajectory.logs)


async def test_the_exception_budget_decides_about_crashed_servers(
    faulty_mailbox: McpServer, llm: ScriptedLLM
) -> None:
    def agent(body: dict[str, Any]) -> Any:
        task = body["messages"][1]["content"]
        name = "crash_server" if "crash" in task else "complete_task"
        return {"tool_calls": [(name, {"summary": "ok"} if name == "complete_task" else {})]}

    llm.on("agent", agent)
    model = agent_model(llm)

    def scenario(task: str) -> McpScenario:
        return McpScenario(task_description=task, server_params=faulty_mailbox)

    groups = await art.gather_trajectory_groups(
        [art.TrajectoryGroup([rollout(model, scenario("crash it")), rollout(model, scenario("finish"))])],
        pbar_desc=None,
        max_exceptions=1,
    )
    assert len(groups[0].trajectories) == 1 and groups[0].trajectories[0].metrics["task_completed"]
    assert len(groups[0].exceptions) == 1 and groups[0].exceptions[0].type == "McpServerError"
    with pytest.raises(McpServerError):  # the rollout's own exception, as the reference raises it
        await art.gather_trajectory_groups(
            [art.TrajectoryGroup([rollout(model, scenario("crash again"))])], pbar_desc=None, max_exceptions=0
        )
    # Or keep the trajectory and let the metrics tell.
    recorded = await rollout(model, scenario("crash"), config=McpRolloutConfig(on_server_error="record"))
    assert recorded.metrics["server_error"] and not recorded.metrics["task_completed"]


@pytest.mark.parametrize(
    ("server", "message"),
    [
        (
            McpServer.stdio("/no/such/mcp-server"),
            "could not start or reach the MCP server /no/such/mcp-server",
        ),
        (McpServer.stdio(sys.executable, "-c", "pass"), "could not start or reach"),
        (
            McpServer.stdio(sys.executable, "-c", "import time; time.sleep(120)", connect_timeout=3),
            "could not start or reach.*timed out",
        ),
    ],
    ids=["missing-command", "exits-at-once", "never-answers"],
)
async def test_a_server_that_does_not_start_fails_fast_and_clearly(
    server: McpServer, message: str, llm: ScriptedLLM
) -> None:
    started = time.monotonic()
    with pytest.raises(McpServerError, match=message) as info:
        await rollout(agent_model(llm), McpScenario(task_description="x", server_params=server))
    assert time.monotonic() - started < 30
    assert info.value.trajectory.metrics["server_error"] and llm.requests_for("agent") == []


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


async def test_streamable_http_transport(llm: ScriptedLLM) -> None:
    port = free_port()
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "art.examples.mcp_rl.server",
            "--transport",
            "streamable-http",
            "--port",
            str(port),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        server = McpServer.http(f"http://127.0.0.1:{port}/mcp", timeout=10)
        deadline = time.monotonic() + 60
        while True:
            try:
                tools, _ = await list_tools_and_resources(server)
                break
            except McpServerError:
                if time.monotonic() > deadline or process.poll() is not None:
                    raise
                time.sleep(0.5)
        assert "search_emails" in {t.name for t in tools}
        llm.on(
            "agent",
            scripted(
                {"tool_calls": [("move_email", {"email_id": 3, "folder": "trash"})]},
                {"tool_calls": [("complete_task", {"summary": "trashed 3"})]},
            ),
        )
        trajectory = await rollout(
            agent_model(llm), McpScenario(task_description="trash email 3", server_params=server)
        )
        assert trajectory.metrics["task_completed"] and trajectory.metrics["tool_errors"] == 0
        # One server for every client: the state persists across sessions.
        async with art.mcp.connect(server) as client:
            result = await client.call_tool("folder_counts", {})
        assert json.loads(result.content[0].text)["trash"] == 1
    finally:
        process.terminate()
        process.wait(timeout=10)
