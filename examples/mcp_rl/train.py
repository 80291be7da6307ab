"""MCP-RL on the shipped mailbox server: teach a model to use an MCP server's tools, from no data.

    python -m art.examples.mcp_rl.train --judge openai/o4-mini             # scenarios written offline
    python -m art.examples.mcp_rl.train --judge self --quick                # a plumbing run, judged by itself
    python -m art.examples.mcp_rl.train --judge J --generator G             # scenarios by a generator LLM

Steps: start the server (`python -m art.examples.mcp_rl.server`, stdio: one server process per rollout,
so every episode starts from the same mailbox); list its tools; take scenarios (from a generator with
`art.mcp.generate_scenarios`, or the offline ones in scenarios.py) and split them into training and
held-out tasks; train with RULER-scored GRPO (`art.recipes.ruler_loop.train_with_ruler`, rollouts by
`art.mcp.rollout`), each judge score plus a small label-free bonus (`--shaping-weight` x
`art.mcp.tool_use_signal`: finished task, share of valid tool calls; 0 turns it off); compare trained and
base model on the held-out tasks, side by side under the judge, and by those label-free signals.
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

from art.examples.mcp_rl.scenarios import offline_scenarios

import art
from art.mcp import (
    McpRolloutConfig,
    McpScenario,
    McpServer,
    generate_scenarios,
    list_tools_and_resources,
    rollout,
    tool_use_signal,
)
from art.recipes.ruler_loop.endpoints import SELF, llm_spec
from art.recipes.ruler_loop.loop import (
    RulerTrainingConfig,
    RulerTrainingResult,
    format_comparison,
    serving,
    train_with_ruler,
)

RUBRIC = """\
- A trajectory that gets the task done (the right information found, the requested change made) and
  reports it in complete_task scores clearly higher than one that does not.
- Real tool calls with correct arguments beat guessing, invented answers or text without tool use.
- Among trajectories that get it done, fewer wasted or failing tool calls score higher.
- Give partial credit for real progress (a relevant search, the right email read)."""


@dataclass
class McpRlConfig:
    """Hyper-parameters of the example (defaults: a modest run of the default model on 2 CPU cores)."""

    base_model: str = "smollm2-135m"
    project: str = "mcp-rl"
    name: str = "mailbox-agent"
    base_path: str = ".art"
    judge: str | None = None
    judge_base_url: str | None = None
    judge_api_key: str | None = None
    generator: str | None = None  # None: the offline scenarios
    generator_base_url: str | None = None
    generator_api_key: str | None = None
    num_train: int = 16
    num_val: int = 8
    steps: int = 4
    groups_per_step: int = 2
    rollouts_per_group: int = 4
    learning_rate: float = 1e-4
    max_turns: int = 4
    max_tokens: int = 192
    temperature: float = 1.0
    # "required": every turn is one tool call (constrained decoding), ending on complete_task; SmolLM2-135M
    # never calls a tool on its own. "auto" (or "none" for no constraint) for models that do.
    tool_choice: str = "required"
    parallel_tool_calls: bool = False
    # Tool results longer than this are cut (with a note): the judge sees a whole group at once, and
    # SmolLM2's 8k context must hold 4 trajectories of up to 4 turns.
    max_tool_result_chars: int = 1000
    # Added to each training score: weight x tool_use_signal (0..1: finished task, valid tool calls). It
    # ranks a group the judge scores alike (the self judge does); 0: the judge's score alone.
    shaping_weight: float = 0.2
    eval_every: int = 0
    mailbox_seed: int = 0
    seed: int = 0

    @classmethod
    def quick(cls, **overrides: Any) -> McpRlConfig:
        """A smoke run: two small steps, four held-out tasks."""
        values: dict[str, Any] = {
            "num_train": 4,
            "num_val": 4,
            "steps": 2,
            "rollouts_per_group": 2,
            "max_turns": 2,
        }
        values.update(overrides)
        return cls(**values)


def mailbox_server(seed: int = 0) -> McpServer:
    """The shipped server, started with this Python over stdio."""
    return McpServer.stdio(sys.executable, "-m", "art.examples.mcp_rl.server", "--seed", str(seed))


async def load_scenarios(
    config: McpRlConfig, server: McpServer, generator: Any, echo: Callable[[str], None]
) -> tuple[list[McpScenario], list[McpScenario]]:
    """(training, held-out) scenarios, disjoint: generated from the server's tools, or the offline ones."""
    total = config.num_train + config.num_val
    if generator is not None:
        tools, resources = await list_tools_and_resources(server)
        echo(f"asking {generator.label} for {total} scenarios from {len(tools)} tools...")
        collection = await generate_scenarios(
            tools, resources, num_scenarios=total, show_preview=False, generator=generator
        )
    else:
        collection = offline_scenarios(config.mailbox_seed)
        if len(collection) < total:
            raise ValueError(
                f"there are {len(collection)} offline scenarios; ask for at most that many (num_train + num_val)"
            )
        echo(f"{len(collection)} offline scenarios (no generator configured); using {total}")
    train, val = collection.shuffle(config.seed).split(config.num_train)

    def as_scenarios(items: Any) -> list[McpScenario]:
        return [
            McpScenario(
                task_description=s.task,
                server_params=server,
                max_turns=config.max_turns,
                difficulty=s.difficulty,
            )
            for s in items
        ]

    return as_scenarios(train), as_scenarios(list(val)[: config.num_val])


async def run_mcp_rl(
    config: McpRlConfig, *, backend: art.Backend | None = None, echo: Callable[[str], None] = print
) -> RulerTrainingResult[McpScenario]:
    """Register the model, load scenarios, train, compare with the base model; see the module docstring."""
    if config.judge != SELF:  # fail before loading anything
        llm_spec("judge", config.judge, config.judge_base_url, config.judge_api_key, hints="flags")
    model = art.TrainableModel(
        name=config.name, project=config.project, base_model=config.base_model, base_path=config.base_path
    )
    async with serving(model, backend, echo):
        judge = llm_spec(
            "judge", config.judge, config.judge_base_url, config.judge_api_key, trainable=model, hints="flags"
        )
        generator = (
            llm_spec(
                "generator",
                config.generator,
                config.generator_base_url,
                config.generator_api_key,
                trainable=model,
                hints="flags",
            )
            if config.generator
            else None
        )
        server = mailbox_server(config.mailbox_seed)
        train, val = await load_scenarios(config, server, generator, echo)
        rollout_config = McpRolloutConfig(
            temperature=config.temperature,
            max_tokens=config.max_tokens,
            tool_choice=None if config.tool_choice == "none" else config.tool_choice,
            max_tool_result_chars=config.max_tool_result_chars,
            parallel_tool_calls=config.parallel_tool_calls,
        )

        async def run(m: art.Model, scenario: McpScenario) -> art.Trajectory:
            return await rollout(m, scenario, config=rollout_config)

        result = await train_with_ruler(
            model,
            train,
            val,
            run,
            judge,
            RulerTrainingConfig(
                steps=config.steps,
                groups_per_step=config.groups_per_step,
                rollouts_per_group=config.rollouts_per_group,
                learning_rate=config.learning_rate,
                eval_every=config.eval_every,
                seed=config.seed,
                rubric=RUBRIC,
                shaping=config.shaping_weight * tool_use_signal if config.shaping_weight else None,
            ),
            echo=echo,
            title=f"MCP-RL: {config.name} on the mailbox server",
        )
        echo("")
        if result.final is not None:
            echo(f"held-out tasks ({config.num_val}), trained vs base: {format_comparison(result.final)}")
            echo(f"held-out, label-free (trained vs base): {format_signals(result.final.signals)}")
        if result.weak_judge:
            echo("(judged by the base model itself: a plumbing run, not a measure of quality)")
        echo(f"history: {result.history_path}")
        if result.plot_path is not None:
            echo(f"plot:    {result.plot_path}")
        return result


def format_signals(signals: dict[str, tuple[float, float]]) -> str:
    """Task completion and tool-call failure rates of both models, from their trajectories' metrics."""

    def rate(part: str, whole: str, index: int) -> str:
        if part not in signals or whole not in signals or not signals[whole][index]:
            return "-"
        return f"{signals[part][index] / signals[whole][index]:.0%}"

    def share(name: str, index: int) -> str:
        return f"{signals[name][index]:.0%}" if name in signals else "-"

    return (
        f"tasks completed {share('task_completed', 0)} vs {share('task_completed', 1)}, "
        f"tool calls failed {rate('tool_errors', 'tool_calls', 0)} vs {rate('tool_errors', 'tool_calls', 1)}"
    )


def _flag_bool(text: str) -> bool:
    """`--parallel-tool-calls true|false` (argparse's bool() would take "false" as True)."""
    if text.lower() in ("1", "true", "yes"):
        return True
    if text.lower() in ("0", "false", "no"):
        return False
    raise ValueError(f"expected true or false, got {text!r}")


def main() -> None:
    """Command-line entry: `python -m art.examples.mcp_rl.train [--quick] --judge J [--generator G] ...`."""
    import argparse

    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--quick", action="store_true", help="a smoke run")
    for key, value in asdict(McpRlConfig()).items():
        kind = _flag_bool if isinstance(value, bool) else type(value) if value is not None else str
        parser.add_argument(f"--{key.replace('_', '-')}", type=kind, default=None)
    args = vars(parser.parse_args())
    quick = args.pop("quick")
    overrides = {k: v for k, v in args.items() if v is not None}
    config = McpRlConfig.quick(**overrides) if quick else McpRlConfig(**overrides)
    asyncio.run(run_mcp_rl(config))


if __name__ == "__main__":
    main()
