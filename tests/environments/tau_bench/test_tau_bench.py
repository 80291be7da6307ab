"""art.tau_bench: the environment client against a scripted server (retries, ids, errors) and one
episode played through the official openai client (tool calls as actions, rewards, clean-up)."""

from __future__ import annotations

import importlib
import json
from typing import Any

import httpx
import pytest
from openai import AsyncOpenAI

import art.tau_bench as tau

rollout_module = importlib.import_module(
    "art.tau_bench.rollout"
)  # the module (the package exports the function)


def _tau_server(log: list[tuple[str, str, dict[str, Any]]]) -> httpx.MockTransport:
    """A tau-bench server: one task whose customer wants an order cancelled."""

    def handle(request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content) if request.content else {}
        log.append((request.method, request.url.path, body))
        if request.url.path == "/scenarios":
            return httpx.Response(200, json={"scenarios": [{"domain": "retail", "task": {"id": "t1"}}]})
        if request.method == "POST" and request.url.path == "/environments":
            tools = [{"type": "function", "function": {"name": "cancel", "parameters": {"type": "object"}}}]
            return httpx.Response(
                200,
                json={
                    "id": "env-7",
                    "observation": "user: cancel order 42",
                    "info": {"policy": "Be kind.", "tools": tools},
                },
            )
        if request.url.path == "/environments/env-7/step":
            action = body["action"]
            if action.startswith("cancel("):
                return httpx.Response(
                    200,
                    json={"id": "env-7", "observation": "tool: cancelled", "reward": 0.5, "terminated": False,
                          "truncated": False, "info": {}},
                )  # fmt: skip
            return httpx.Response(
                200,
                json={"id": "env-7", "observation": "user: thanks", "reward": 0.5, "terminated": True,
                      "truncated": False, "info": {"user_message_cost": 0.01}},
            )  # fmt: skip
        if request.method == "DELETE":
            return httpx.Response(200, json={"id": "env-7", "deleted": True})
        return httpx.Response(404, json={"detail": f"no route {request.url.path}"})

    return httpx.MockTransport(handle)


def _model_endpoint(requests: list[dict[str, Any]]) -> httpx.MockTransport:
    """The policy: first a tool call with JSON arguments, then a reply to the customer."""

    def handle(request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content)
        requests.append(body)
        if len(requests) == 1:
            message = {"role": "assistant", "content": None, "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "cancel", "arguments": '{"order": 42}'}}]}  # fmt: skip
        else:
            message = {"role": "assistant", "content": "Done: order 42 is cancelled."}
        return httpx.Response(
            200,
            json={"id": "x", "object": "chat.completion", "created": 0, "model": body["model"],
                  "choices": [{"index": 0, "message": message, "finish_reason": "stop", "logprobs": None}],
                  "usage": {"prompt_tokens": 1_000_000, "completion_tokens": 1_000_000, "total_tokens": 2_000_000 // 100}},
        )  # fmt: skip

    return httpx.MockTransport(handle)


async def test_client_sends_the_key_retries_with_one_request_id_and_names_errors() -> None:
    seen: list[tuple[str | None, str | None]] = []

    def flaky(request: httpx.Request) -> httpx.Response:
        seen.append((request.headers.get("authorization"), request.headers.get("x-request-id")))
        if len(seen) < 3:
            return httpx.Response(503, text="busy")
        if request.url.path == "/environments/missing/step":
            return httpx.Response(404, json={"detail": "no environment 'missing'"})
        return httpx.Response(200, json={"scenarios": [{"domain": "airline", "task": {"id": "a1"}}]})

    http = httpx.AsyncClient(base_url="http://tau.test", transport=httpx.MockTransport(flaky))
    client = tau.TauBenchClient(api_key="k", http_client=http, status_retries=3, retry_base_delay=0)
    (scenario,) = await client.get_scenarios(domain="airline")
    assert scenario == tau.Scenario(domain="airline", task=tau.Task(id="a1"))
    assert [auth for auth, _ in seen] == ["Bearer k"] * 3 and len({rid for _, rid in seen}) == 1
    with pytest.raises(httpx.HTTPStatusError, match=r"404 .*no environment 'missing'"):
        await client.step_environment("missing", "hi")
    await http.aclose()


async def test_an_episode_becomes_a_trajectory_and_its_environment_is_deleted(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    log: list[tuple[str, str, dict[str, Any]]] = []
    requests: list[dict[str, Any]] = []
    http = httpx.AsyncClient(base_url="http://tau.test", transport=_tau_server(log))
    client = tau.TauBenchClient(api_key="k", http_client=http)
    llm = AsyncOpenAI(
        base_url="http://model.test/v1",
        api_key="m",
        http_client=httpx.AsyncClient(transport=_model_endpoint(requests)),
    )
    monkeypatch.setitem(rollout_module.openai_clients, ("http://model.test/v1", "m"), llm)
    (scenario,) = await tau.get_scenarios(domain="retail", client=client)

    trajectory = await tau.rollout(
        scenario, "http://model.test/v1", "m", "policy", client=client, base_model="Qwen/Qwen3-8B"
    )
    assert trajectory.reward == 1.0 and trajectory.metrics["num_turns"] == 2
    assert trajectory.metadata == {"scenario_id": "t1"}
    steps = [body["action"] for method, path, body in log if path.endswith("/step")]
    assert steps == ["cancel(order=42)", "Done: order 42 is cancelled."]
    assert log[-1][:2] == ("DELETE", "/environments/env-7")
    messages = trajectory.messages()
    assert [m["role"] for m in messages] == ["system", "user", "assistant", "tool", "assistant", "user"]
    assert messages[3] == {"role": "tool", "content": "cancelled", "tool_call_id": "c1"}
    assert trajectory.metrics["cost/user"] == pytest.approx(0.01)
    # the reference's hosted prices for Qwen3-8B: $0.13 per million prefill, $0.40 per million sampled
    assert trajectory.metrics["cost/tinker/prefill"] == pytest.approx(2 * 0.13)
    assert requests[1]["messages"][-1] == {"role": "tool", "content": "cancelled", "tool_call_id": "c1"}
    await http.aclose()
