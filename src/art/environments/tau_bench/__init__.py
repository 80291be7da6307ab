"""tau-bench episodes as trajectories: a client of a tau-bench environment server and a `rollout` that
plays one task (the reference's `art.tau_bench`, same names). The server itself is not part of ART.

    scenarios = await art.tau_bench.get_scenarios(domain="retail", split="train")
    trajectory = await art.tau_bench.rollout(scenarios[0], model, max_turns=30)
"""

from __future__ import annotations

from art.environments.tau_bench.client import (
    DeleteEnvironmentResponse,
    EnvironmentResponse,
    Scenario,
    StepEnvironmentResponse,
    Task,
    TauBenchClient,
    default_client,
    get_scenarios,
)
from art.environments.tau_bench.rollout import default_user_llm_args, rollout

__all__ = [
    "DeleteEnvironmentResponse",
    "EnvironmentResponse",
    "Scenario",
    "StepEnvironmentResponse",
    "Task",
    "TauBenchClient",
    "default_client",
    "default_user_llm_args",
    "get_scenarios",
    "rollout",
]
