"""`generate_scenarios` against a scripted generator served over HTTP: the request it sends, validation,
retries of short or malformed answers, the refusal quoting the answer, and configuration errors."""

from __future__ import annotations

import json
from typing import Any

import pytest
from scripted_llm import ScriptedLLM, user_text

from art.mcp import GeneratedScenarioCollection, MCPResource, MCPTool, generate_scenarios
from art.recipes.ruler_loop import GeneratorError, NotConfiguredError
from art.rewards import Judge, RetryPolicy

TOOLS = [
    MCPTool(
        name="search_emails",
        description="Search the mailbox",
        parameters={"type": "object", "properties": {"query": {"type": "string"}}},
    ),
    {
        "name": "read_email",
        "description": "Read one email",
        "parameters": {"type": "object", "properties": {"email_id": {"type": "integer"}}},
    },
]
RESOURCES = [MCPResource(uri="mailbox://folders", name="folders", description="folder counts")]


def answer(n: int, start: int = 0, difficulty: Any = 2) -> str:
    return json.dumps(
        {
            "scenarios": [
                {"task": f"Task number {i}: find something", "difficulty": difficulty}
                for i in range(start, start + n)
            ]
        }
    )


def queue(*answers: str) -> Any:
    pending = list(answers)
    return lambda body: pending.pop(0)


async def test_scenarios_from_the_tool_list(llm: ScriptedLLM, capsys: pytest.CaptureFixture[str]) -> None:
    llm.on("gen", queue(answer(6)))
    collection = await generate_scenarios(
        TOOLS, RESOURCES, num_scenarios=5, custom_instructions="Only about wifi.",
        generator_model="gen", generator_base_url=llm.base_url, generator_api_key="key",
    )  # fmt: skip
    assert isinstance(collection, GeneratedScenarioCollection) and len(collection) == 5  # extra ones trimmed
    assert collection[0].task == "Task number 0: find something" and collection[0].difficulty == 2
    request = llm.requests_for("gen")[0]
    prompt = user_text(request)
    assert "search_emails" in prompt and "read_email" in prompt and "mailbox://folders" in prompt
    assert "Only about wifi." in prompt and "5" in prompt
    schema = request["response_format"]["json_schema"]["schema"]
    assert schema["properties"]["scenarios"]["minItems"] == 5
    out = capsys.readouterr().out
    assert "Difficulty distribution" in out and "Task number 0" in out  # show_preview


@pytest.mark.parametrize(
    "bad",
    [
        answer(2),  # too short
        "Sure! Here are some scenarios: 1. find the wifi password",  # not JSON
        answer(5, difficulty=9),  # difficulty out of range
        json.dumps({"scenarios": [{"task": "same task", "difficulty": 1}] * 5}),  # repeated
    ],
    ids=["short", "not-json", "bad-difficulty", "repeated"],
)
async def test_a_bad_answer_is_asked_again_with_what_was_wrong(llm: ScriptedLLM, bad: str) -> None:
    llm.on("gen", queue(bad, answer(5)))
    collection = await generate_scenarios(
        TOOLS, num_scenarios=5, show_preview=False, generator_model="gen", generator_base_url=llm.base_url
    )
    assert len(collection) == 5
    requests = llm.requests_for("gen")
    assert len(requests) == 2
    retry = requests[1]["messages"]
    assert retry[-2] == {"role": "assistant", "content": bad[:2000]}
    assert "could not be used" in retry[-1]["content"]


async def test_a_generator_that_never_complies_is_refused_quoting_its_answer(llm: ScriptedLLM) -> None:
    llm.on("gen", lambda body: answer(3))
    generator = Judge(
        model="gen", base_url=llm.base_url, retry=RetryPolicy(max_invalid_answers=2, initial_delay=0)
    )
    with pytest.raises(GeneratorError) as info:
        await generate_scenarios(TOOLS, num_scenarios=5, show_preview=False, generator=generator)
    message = str(info.value)
    assert "generator gen @ " in message and "in 3 tries" in message
    assert "got 3 usable scenarios, need 5" in message and "Task number 0" in message
    assert len(llm.requests_for("gen")) == 3 and info.value.last_answer == answer(3)


async def test_unreachable_or_unconfigured_generators_say_what_to_do(
    llm: ScriptedLLM, monkeypatch: pytest.MonkeyPatch
) -> None:
    llm.on("gen", lambda body: answer(5))
    with pytest.raises(GeneratorError, match=r"refused the request.*404.*model name"):
        await generate_scenarios(
            TOOLS, num_scenarios=5, generator_model="other", generator_base_url=llm.base_url
        )
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with pytest.raises(NotConfiguredError, match=r"OPENAI_API_KEY.*generator_api_key="):
        await generate_scenarios(TOOLS, num_scenarios=5)  # the default generator, openai/gpt-4.1-mini
    with pytest.raises(ValueError, match="at least one tool or resource"):
        await generate_scenarios([], num_scenarios=5, generator_model="gen", generator_base_url=llm.base_url)
    with pytest.raises(ValueError, match="num_scenarios"):
        await generate_scenarios(
            TOOLS, num_scenarios=0, generator_model="gen", generator_base_url=llm.base_url
        )


def test_preview_scenarios_prints_numbered_dimmed_previews(capsys: pytest.CaptureFixture[str]) -> None:
    from art.mcp.generate_scenarios import preview_scenarios
    from art.utils.logging import _C

    long_task = "Find " + "x" * 200
    preview_scenarios(
        [{"task": "List the open tickets", "difficulty": 1}, {"task": long_task, "difficulty": 4}], n=5
    )
    first, second = capsys.readouterr().out.splitlines()
    assert first == f"{_C.DIM}   1. List the open tickets  (difficulty 1/5){_C.RESET}"
    assert second.startswith(f"{_C.DIM}   2. Find xxx") and "…  (difficulty 4/5)" in second
    preview_scenarios([{"task": "no difficulty"}, {"task": "third"}], n=1)  # as the reference: N/A, n kept
    assert capsys.readouterr().out.splitlines() == [
        f"{_C.DIM}   1. no difficulty  (difficulty N/A/5){_C.RESET}"
    ]
    with pytest.raises(ValueError, match="scenario 1: 'task' must be a string"):
        preview_scenarios([{"difficulty": 2}])
