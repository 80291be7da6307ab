"""`generate_scenarios`: tasks for an MCP agent, written by an LLM from the server's tool list alone.

The generator is any LiteLLM model string (default `openai/gpt-4.1-mini`, its key from the provider's
environment variable or `generator_api_key`) or any OpenAI-compatible server (`generator_base_url`). It is
asked for `{"scenarios": [{"task", "difficulty"}]}` with a JSON schema; the answer is validated here
(at least `num_scenarios` distinct, non-blank tasks with difficulties 1-5). A short or malformed answer is
shown back to the generator with what was wrong and asked again, then refused with a `GeneratorError`
quoting it.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from typing import Any

from pydantic import ValidationError

from art.recipes.mcp_rl.types import (
    GeneratedScenario,
    GeneratedScenarioCollection,
    MCPResource,
    MCPTool,
    cut_task,
)
from art.recipes.ruler_loop.endpoints import llm_spec
from art.recipes.ruler_loop.structured import (
    dump_for_prompt,
    generate_structured,
    json_schema_format,
    load_json,
)
from art.rewards.judge import InvalidAnswer, Judge
from art.utils.logging import dim

logger = logging.getLogger("art.mcp")

DEFAULT_GENERATOR = "openai/gpt-4.1-mini"

PROMPT = """\
You write test scenarios for an AI agent that works through the tools of an MCP (Model Context Protocol) \
server.

The server offers these tools:
{tools}

And these resources:
{resources}

Write {n} different, realistic tasks that a user could ask this agent to do with these tools.
- Each task must be achievable with the tools above; do not name the tools to use.
- Vary the difficulty: some need one tool call, some need several calls and reasoning over the results.
- Cover different tools, combinations and use cases; no two tasks alike.
- Each task asks the agent to finish with a short report of what it found or did.
- Give each task a difficulty from 1 (one tool call) to 5 (many steps and analysis).

Answer with one JSON object and nothing else: {{"scenarios": [{{"task": "...", "difficulty": 1}}, ...]}} \
with exactly {n} entries."""


def scenario_schema(num_scenarios: int) -> dict[str, Any]:
    """The JSON schema of the answer (sent as response_format; the count is checked here too)."""
    return {
        "type": "object",
        "properties": {
            "scenarios": {
                "type": "array",
                "items": {
                    "type": "object",
                    "properties": {
                        "task": {"type": "string"},
                        "difficulty": {"type": "integer", "minimum": 1, "maximum": 5},
                    },
                    "required": ["task", "difficulty"],
                    "additionalProperties": False,
                },
                "minItems": num_scenarios,
                "maxItems": num_scenarios,
            }
        },
        "required": ["scenarios"],
        "additionalProperties": False,
    }


def parse_scenarios(answer: str | None, num_scenarios: int) -> list[GeneratedScenario]:
    """The first `num_scenarios` valid, distinct scenarios of an answer; InvalidAnswer if there are fewer.

    Invalid entries are skipped when enough valid ones remain; otherwise every problem is listed.
    """
    data = load_json(answer)
    items = data.get("scenarios") if isinstance(data, dict) else data
    if not isinstance(items, list):
        raise InvalidAnswer(['the answer has no "scenarios" list'])
    problems: list[str] = []
    valid: list[GeneratedScenario] = []
    seen: set[str] = set()
    for k, item in enumerate(items):
        if not isinstance(item, dict):
            problems.append(f"scenarios[{k}] is not an object")
            continue
        try:
            scenario = GeneratedScenario.model_validate(item)
        except ValidationError as exc:
            first = exc.errors()[0]
            field = ".".join(str(p) for p in first["loc"])
            problems.append(f"scenarios[{k}].{field}: {first['msg']} (got {item.get(field)!r})")
            continue
        key = " ".join(scenario.task.lower().split())
        if key in seen:
            problems.append(f"scenarios[{k}] repeats an earlier task")
            continue
        seen.add(key)
        valid.append(scenario)
    if len(valid) >= num_scenarios:
        if problems:
            logger.info(
                "generate_scenarios: skipped %d unusable entries: %s", len(problems), "; ".join(problems[:5])
            )
        return valid[:num_scenarios]
    shown = problems[:8] + ([f"... and {len(problems) - 8} more problems"] if len(problems) > 8 else [])
    raise InvalidAnswer([f"got {len(valid)} usable scenarios, need {num_scenarios}", *shown])


def preview_scenarios(scenarios: Sequence[dict[str, Any]] | Sequence[GeneratedScenario], n: int = 5) -> None:
    """Print the first `n` scenarios, dimmed, as numbered one-line previews (the reference's helper).

    Dicts need a `task`; a missing `difficulty` shows as "N/A", as in the reference (only a preview: it
    validates nothing else).

    Example:
        preview_scenarios([{"task": "List the open tickets", "difficulty": 1}])
    """
    items: list[dict[str, Any] | GeneratedScenario] = list(scenarios)
    for i, s in enumerate(items[: max(n, 0)]):
        if isinstance(s, GeneratedScenario):
            task, difficulty = s.preview(), str(s.difficulty)
        else:
            text = s.get("task")
            if not isinstance(text, str):
                raise ValueError(f"scenario {i + 1}: 'task' must be a string, got {text!r}")
            task, difficulty = cut_task(text), str(s.get("difficulty", "N/A"))
        dim(f"   {i + 1}. {task}  (difficulty {difficulty}/5)")


def _tools_info(tools: Sequence[MCPTool] | Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    return [t.to_dict() if isinstance(t, MCPTool) else MCPTool.from_dict(t).to_dict() for t in tools]


def _resources_info(
    resources: Sequence[MCPResource] | Sequence[dict[str, Any]] | None,
) -> list[dict[str, Any]]:
    return [
        r.to_dict() if isinstance(r, MCPResource) else MCPResource.from_dict(r).to_dict()
        for r in resources or []
    ]


async def generate_scenarios(
    tools: Sequence[MCPTool] | Sequence[dict[str, Any]],
    resources: Sequence[MCPResource] | Sequence[dict[str, Any]] = (),
    num_scenarios: int = 24,
    show_preview: bool = True,
    custom_instructions: str | None = None,
    generator_model: str = DEFAULT_GENERATOR,
    generator_api_key: str | None = None,
    generator_base_url: str | None = None,
    *,
    generator: Judge | None = None,
) -> GeneratedScenarioCollection:
    """Generate `num_scenarios` tasks for an agent using these MCP tools (and resources).

    `tools`: `MCPTool`s or dicts (`name`, `description`, `parameters`); `generator_model`: a LiteLLM
    model string, or the model name at `generator_base_url` (any OpenAI-compatible server);
    `generator`: a full `art.rewards.Judge` spec instead (timeouts, retries, params). Raises ValueError for
    bad input, `NotConfiguredError` when the generator cannot be reached as given (what to set), and
    `GeneratorError` (quoting the answer) when it gives no usable answer.

    Example:
        tools, resources = await art.mcp.list_tools_and_resources(server)
        scenarios = await generate_scenarios(tools, resources, num_scenarios=24)
        train, val = scenarios.split(train_size=16)
    """
    if not isinstance(num_scenarios, int) or num_scenarios < 1:
        raise ValueError(f"num_scenarios must be an integer >= 1, got {num_scenarios!r}")
    if not tools and not resources:
        raise ValueError("generate_scenarios needs at least one tool or resource to write tasks for")
    started = time.perf_counter()
    spec = generator or llm_spec(
        "generator", generator_model, generator_base_url, generator_api_key, hints="kwargs"
    )
    tools_info, resources_info = _tools_info(tools), _resources_info(resources)
    prompt = PROMPT.format(
        tools=dump_for_prompt(tools_info),
        resources=dump_for_prompt(resources_info) if resources_info else "(none)",
        n=num_scenarios,
    )
    if custom_instructions:
        prompt += f"\n\nFollow these instructions closely as well:\n{custom_instructions}"
    logger.info(
        "generate_scenarios: asking %s for %d scenarios (%d tools, %d resources)",
        spec.label,
        num_scenarios,
        len(tools_info),
        len(resources_info),
    )
    scenarios = await generate_structured(
        spec,
        [{"role": "user", "content": prompt}],
        lambda answer: parse_scenarios(answer, num_scenarios),
        schema=json_schema_format("scenario_list", scenario_schema(num_scenarios)),
        what=f"{num_scenarios} scenarios",
    )
    collection = GeneratedScenarioCollection(scenarios)
    logger.info("generate_scenarios: %d scenarios in %.1fs", len(collection), time.perf_counter() - started)
    if show_preview:
        collection.print_difficulty_distribution()
        collection.preview(n=min(5, num_scenarios))
    return collection
