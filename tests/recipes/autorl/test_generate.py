"""AutoRL's generation against a scripted generator over HTTP: inputs validated, retried, refused with a
quote; the system prompt; the train/held-out split never overlaps; an empty task is refused."""

from __future__ import annotations

import json
from typing import Any

import pytest
from scripted_llm import ScriptedLLM, user_text

from art.recipes.autorl import generate_system_prompt, generate_training_inputs, split_inputs
from art.recipes.ruler_loop import GeneratorError
from art.rewards import Judge, RetryPolicy

TASK = "Rewrite the user's text in formal business English."


def generator(llm: ScriptedLLM, **retry: Any) -> Judge:
    return Judge(model="gen", base_url=llm.base_url, retry=RetryPolicy(initial_delay=0, **retry))


def queue(*answers: str) -> Any:
    pending = list(answers)
    return lambda body: pending.pop(0)


def inputs_answer(n: int) -> str:
    return json.dumps({"inputs": [{"input": f"hey can u send report {i} asap"} for i in range(n)]})


async def test_inputs_are_validated_and_short_answers_asked_again(llm: ScriptedLLM) -> None:
    repeated = json.dumps({"inputs": [{"input": "same"}] * 6})
    llm.on("gen", queue(inputs_answer(3), repeated, inputs_answer(7)))
    inputs = await generate_training_inputs(TASK, 6, generator=generator(llm))
    assert inputs == [f"hey can u send report {i} asap" for i in range(6)]
    requests = llm.requests_for("gen")
    assert len(requests) == 3 and TASK in user_text(requests[0])
    assert "got 3 distinct non-blank inputs, need 6" in requests[1]["messages"][-1]["content"]
    assert "5 were blank or repeated" in requests[2]["messages"][-1]["content"]
    assert requests[0]["response_format"]["type"] == "json_schema"


async def test_bare_string_lists_are_accepted(llm: ScriptedLLM) -> None:
    llm.on("gen", lambda body: json.dumps({"inputs": ["a b", "c d"]}))
    assert await generate_training_inputs(TASK, 2, generator=generator(llm)) == ["a b", "c d"]


async def test_a_generator_that_never_complies_is_refused_quoting_it(llm: ScriptedLLM) -> None:
    llm.on("gen", lambda body: "Here are some ideas: formal letters, emails, memos.")
    with pytest.raises(GeneratorError) as info:
        await generate_training_inputs(TASK, 4, generator=generator(llm, max_invalid_answers=1))
    message = str(info.value)
    assert "no usable answer for 4 training inputs in 2 tries" in message
    assert "the answer is not JSON" in message and "Here are some ideas" in message


async def test_system_prompt_drafted_and_a_stub_refused(llm: ScriptedLLM) -> None:
    good = "You rewrite the user's text in formal business English. Keep the meaning; fix the tone."
    llm.on("gen", queue(json.dumps({"system_prompt": "Be formal."}), json.dumps({"system_prompt": good})))
    assert await generate_system_prompt(TASK, generator=generator(llm)) == good
    assert "write a real instruction" in llm.requests_for("gen")[1]["messages"][-1]["content"]


async def test_empty_task_is_refused(llm: ScriptedLLM) -> None:
    with pytest.raises(ValueError, match="task description is empty"):
        await generate_training_inputs("  \n", 3, generator=generator(llm))
    assert llm.requests == []


def test_train_and_held_out_inputs_never_overlap() -> None:
    inputs = [f"input {i}" for i in range(20)]
    train, val = split_inputs(inputs, 5, seed=1)
    assert len(train) == 15 and len(val) == 5 and not set(train) & set(val)
    assert sorted(train + val) == sorted(inputs)
    assert split_inputs(inputs, 5, seed=1) == (train, val) and split_inputs(inputs, 5, seed=2) != (train, val)
