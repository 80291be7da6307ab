"""Recipes: whole training programs built on the client side (model, rollout, rewards, backends).

- `pipeline_trainer`  PipelineTrainer: rollouts, training and evaluation as concurrent stages
- `ruler_loop`        the GRPO loop with RULER-scored rollouts and generated inputs (no dataset)
- `autorl`            `art autorl`: a task in plain English -> generated inputs -> RULER-judged RL
- `mcp_rl`            MCP-RL: an agent trained on the tools of an MCP server (scenarios, rollouts, signals)

None of them imports torch or the heavy side (a `LocalBackend` starts one when needed). The reference's
paths (`art.pipeline_trainer`, `art.mcp`) are shims of these packages (docs/design.md lists every shim).
LangGraph lives with the integrations (`art.integrations.langgraph`), tau-bench's client with the
environments (`art.environments.tau_bench`).
"""
