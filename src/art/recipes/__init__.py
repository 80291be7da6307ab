"""Recipes: whole training programs built on the client side (model, rollout, rewards, backends).

- `pipeline_trainer`  PipelineTrainer: rollouts, training and evaluation as concurrent stages
- `zero_data`         the GRPO loop with RULER-scored rollouts and generated inputs (no dataset)
- `autorl`            `art autorl`: a task in plain English -> generated inputs -> RULER-judged RL
- `mcp_rl`            MCP-RL: an agent trained on the tools of an MCP server (scenarios, rollouts, signals)
- `langgraph`         a LangGraph agent's LLM calls as trajectories
- `tau_bench`         a client of a tau-bench environment server and its rollout

None of them imports torch or the heavy side (a `LocalBackend` starts one when needed). The reference's
paths (`art.pipeline_trainer`, `art.mcp`, `art.langgraph`, `art.tau_bench`) and ours (`art.recipes.ruler_loop`,
`art.recipes.autorl`) are shims of these packages.
"""
