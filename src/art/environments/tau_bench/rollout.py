"""`rollout`: one tau-bench episode played by a model, as an `art.Trajectory` (the reference's
`art.tau_bench.rollout`, same signature).

The environment server (`art.tau_bench.client`) simulates the customer with `user_model_name`; the model
under training answers through an OpenAI-compatible endpoint: an `art.Model` (its `openai_client()` and
inference name) or `(base_url, api_key, model)`. Each turn the model either calls tools (each call is
stepped as `name(arg=value, ...)` and its result comes back as a tool message) or writes to the customer
(the customer's reply comes back as a user message). The rewards of the steps add up to the trajectory's
reward. The episode ends when the environment says so, after `max_turns`, when the endpoint refuses the
request for its length (a `max_tokens` error), or before a turn could overflow a 32k context.

Metrics: `num_turns`, `cost/user` (what the simulated customer cost, when the server reports it) and
`cost/tinker/prefill` / `cost/tinker/sample` (the model's tokens at `art.costs.MODEL_PRICING`'s prices for
`base_model`, when known; `assert_costs=True` makes a missing price an error).

    trajectory = await rollout(scenario, model, max_turns=30)
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from typing import Any

from openai import AsyncOpenAI, BadRequestError

from art.environments.tau_bench.client import Scenario, TauBenchClient, _get_default_client
from art.metrics.costs import get_model_pricing, tokens_to_cost
from art.model import Model
from art.trajectories import Trajectory

openai_clients: dict[tuple[str, str], AsyncOpenAI] = {}
"""Clients for `(base_url, api_key)` rollouts, one per endpoint and key, reused across episodes."""
CONTEXT_TOKEN_LIMIT = 32_768
DEFAULT_MAX_COMPLETION_TOKENS = 4096
DEFAULT_USER_MODEL = "gpt-4.1-2025-04-14"

# Where the simulated user's LLM finds its key, by the model string's provider.
_USER_KEY_ENVS: tuple[tuple[tuple[str, ...], tuple[str, ...]], ...] = (
    (("openrouter/",), ("OPENROUTER_API_KEY",)),
    (("openai/", "gpt-"), ("OPENAI_API_KEY",)),
    (("anthropic/", "claude"), ("ANTHROPIC_API_KEY",)),
    (("gemini/", "google/"), ("GEMINI_API_KEY", "GOOGLE_API_KEY")),
)


def default_user_llm_args(user_model_name: str) -> dict[str, Any]:
    """The simulated user's request settings: temperature 0 and, when this process has it, the API key of
    the user model's provider (so the server can call it on this run's account).

    Example:
        >>> default_user_llm_args("ollama/qwen3")
        {'temperature': 0.0}
    """
    args: dict[str, Any] = {"temperature": 0.0}
    name = user_model_name.lower()
    for prefixes, envs in _USER_KEY_ENVS:
        if name.startswith(prefixes):
            key = next((os.environ[e] for e in envs if os.environ.get(e)), None)
            if key:
                args["api_key"] = key
            break
    return args


def _endpoint(
    target: str | Model, api_key: str | None, model: str | None, base_model: str | None
) -> tuple[Any, str, str | None]:
    """(client, model name to send, base model to price) for an `art.Model` or a `(base_url, key, model)`."""
    if isinstance(target, Model):
        return target.openai_client(), target.get_inference_name(), getattr(target, "base_model", None)
    if api_key is None or model is None:
        raise TypeError(
            "rollout(scenario, base_url, api_key, model): api_key and model are required with a URL"
        )
    key = (target, api_key)
    if key not in openai_clients:
        openai_clients[key] = AsyncOpenAI(api_key=api_key, base_url=target)
    return openai_clients[key], model, base_model


def _action(tool_call: Any) -> str:
    """A tool call as the server's action text: `name(a='x', b=2)`."""
    arguments = json.loads(tool_call.function.arguments or "{}")
    return f"{tool_call.function.name}({', '.join(f'{k}={v!r}' for k, v in arguments.items())})"


def _is_length_error(exc: Exception) -> bool:
    text = str(getattr(exc, "message", exc))
    return "max_tokens" in text or "max_completion_tokens" in text


def _requested_completion_tokens(kwargs: Mapping[str, object]) -> int:
    requested = (
        kwargs.get("max_tokens") or kwargs.get("max_completion_tokens") or DEFAULT_MAX_COMPLETION_TOKENS
    )
    if not isinstance(requested, int):
        raise TypeError("chat_completion_kwargs: max_tokens and max_completion_tokens must be integers")
    return requested


def _add_model_costs(trajectory: Trajectory, base_model: str | None, usage: Any, assert_costs: bool) -> None:
    pricing = get_model_pricing(base_model) if usage is not None else None
    if pricing is None:
        if assert_costs:
            raise ValueError(f"no prices for the model's tokens (base model {base_model!r}, usage {usage!r})")
        return
    trajectory.metrics["cost/tinker/prefill"] += tokens_to_cost(usage.prompt_tokens, pricing.prefill)
    trajectory.metrics["cost/tinker/sample"] += tokens_to_cost(usage.completion_tokens, pricing.sample)


async def rollout(
    scenario: Scenario,
    base_url_or_model: str | Model,
    api_key: str | None = None,
    model: str | None = None,
    /,
    *,
    client: TauBenchClient | None = None,
    base_model: str | None = None,
    max_turns: int | None = None,
    chat_completion_kwargs: dict[str, Any] | None = None,
    user_model_name: str = DEFAULT_USER_MODEL,
    user_chat_completion_kwargs: dict[str, Any] | None = None,
    assert_costs: bool = False,
    retrieval_config: str | None = None,
    retrieval_config_kwargs: dict[str, Any] | None = None,
) -> Trajectory:
    """Play `scenario` once (see the module docstring): `rollout(scenario, model)` with an `art.Model`, or
    `rollout(scenario, base_url, api_key, model_name, base_model=...)` with any OpenAI-compatible endpoint."""
    tau = _get_default_client(client)
    kwargs = dict(chat_completion_kwargs or {})
    user_args = (
        user_chat_completion_kwargs
        if user_chat_completion_kwargs is not None
        else default_user_llm_args(user_model_name)
    )
    async with tau.environment(
        domain=scenario.domain,
        task_id=scenario.task.id,
        user_llm=user_model_name,
        user_llm_args=user_args,
        retrieval_config=retrieval_config,
        retrieval_config_kwargs=retrieval_config_kwargs,
    ) as env:
        llm, model_name, priced_as = _endpoint(base_url_or_model, api_key, model, base_model)
        trajectory = Trajectory(
            messages_and_choices=[
                {"role": "system", "content": env.info["policy"]},
                {"role": "user", "content": env.observation.removeprefix("user: ")},
            ],
            tools=env.info.get("tools"),
            reward=0.0,
            metrics={"cost/tinker/prefill": 0.0, "cost/tinker/sample": 0.0, "cost/user": 0.0},
            metadata={"scenario_id": scenario.task.id},
        )
        turns, done = 0, False
        while not done and (max_turns is None or turns < max_turns):
            try:
                completion = await llm.chat.completions.create(
                    messages=trajectory.messages(),
                    model=model_name,
                    stream=False,
                    tool_choice="auto",
                    tools=trajectory.tools or [],
                    **kwargs,
                )
            except BadRequestError as exc:
                if _is_length_error(exc):  # the conversation no longer fits: the episode ends here
                    break
                raise
            _add_model_costs(trajectory, priced_as, completion.usage, assert_costs)
            choice = completion.choices[0]
            trajectory.messages_and_choices.append(choice)
            calls = getattr(choice.message, "tool_calls", None)
            if calls:
                for call in calls:
                    step = await tau.step_environment(env.id, _action(call))
                    trajectory.messages_and_choices.append(
                        {
                            "role": "tool",
                            "content": step.observation.removeprefix("tool: "),
                            "tool_call_id": call.id,
                        }
                    )
                    trajectory.reward += step.reward
                    done = step.terminated
            else:
                step = await tau.step_environment(env.id, choice.message.content or "")
                if "user_message_cost" in step.info:
                    trajectory.metrics["cost/user"] += step.info["user_message_cost"]
                elif assert_costs:
                    raise ValueError("the tau-bench server reported no cost for the simulated user's message")
                trajectory.messages_and_choices.append(
                    {"role": "user", "content": step.observation.removeprefix("user: ")}
                )
                trajectory.reward += step.reward
                done = step.terminated
            turns += 1
            usage = completion.usage
            if (
                usage is not None
                and usage.total_tokens + _requested_completion_tokens(kwargs) > CONTEXT_TOKEN_LIMIT
            ):
                break  # the next answer might not fit the context
        trajectory.metrics["num_turns"] = turns
        return trajectory
