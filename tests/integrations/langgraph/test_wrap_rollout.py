"""`wrap_rollout` + `init_chat_model` with a real LangGraph ReAct agent against ART's real server.

The replies are scripted (see conftest.py) so the agent really calls its two tools; the server, the chat
template, tool-call parsing, LangChain and LangGraph are all real. The captured trajectory is compared,
message by message, with the messages the agent ended up with.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from agent_helpers import assert_same_conversation, calculator_script, run_agent
from langchain_core.messages import BaseMessage, HumanMessage, SystemMessage, ToolMessage
from openai.types.chat.chat_completion import Choice
from pydantic import BaseModel
from scripted_engine import KEY, ScriptedServer

import art
from art.langgraph import init_chat_model, load_trajectory, read_call_log, wrap_rollout

# The reference's examples use create_react_agent, deprecated (still supported) in LangGraph 1.x.
pytestmark = pytest.mark.filterwarnings("ignore:create_react_agent has been moved")


@pytest.fixture
def model(scripted_server: ScriptedServer, tmp_path: Path) -> art.Model:
    scripted_server.engine.script = calculator_script
    scripted_server.engine.replies.clear()
    return art.Model(
        name="calc",
        project="lg",
        inference_base_url=scripted_server.url,
        inference_api_key=KEY,
        inference_model_name="scripted",
        base_path=str(tmp_path),
    )


async def test_a_react_agent_with_two_tools_becomes_one_trainable_trajectory(
    model: art.Model, scripted_server: ScriptedServer
) -> None:
    seen: list[list[BaseMessage]] = []

    async def rollout(question: str) -> art.Trajectory:
        seen.append(await run_agent(question))
        return art.Trajectory(messages_and_choices=[], reward=0.75, metadata={"question": question})

    trajectory = await wrap_rollout(model, rollout)("What is (2 + 3) * 4?")

    (messages,) = seen
    assert [type(m).__name__ for m in messages] == [
        "SystemMessage",
        "HumanMessage",
        "AIMessage",
        "ToolMessage",
        "AIMessage",
        "ToolMessage",
        "AIMessage",
    ]
    assert [m.content for m in messages if isinstance(m, ToolMessage)] == ["5", "20"]
    assert_same_conversation(messages, trajectory.messages_and_choices)
    # Each Choice holds exactly the ids the engine sampled for that call, in order.
    choices = [item for item in trajectory.messages_and_choices if isinstance(item, Choice)]
    assert [c.token_ids for c in choices] == [ids for _, ids in scripted_server.engine.replies]  # type: ignore[attr-defined]
    assert [c.finish_reason for c in choices] == ["tool_calls", "tool_calls", "stop"]
    assert trajectory.num_trainable_turns() == 3
    assert [t["function"]["name"] for t in trajectory.tools or []] == ["add", "multiply"]
    assert trajectory.additional_histories == []
    assert trajectory.reward == 0.75 and trajectory.metadata == {"question": "What is (2 + 3) * 4?"}
    # Nothing is left behind for a rollout that succeeded, and the trajectory survives the record on disk.
    assert not list((model.storage.root / "langgraph").glob("*.jsonl"))
    await model.log([trajectory], split="val", step=0)
    (stored,) = model.storage.read_groups("val", 0)[0].trajectories
    assert stored.model_dump(mode="json") == trajectory.model_dump(mode="json")


async def test_a_call_with_another_prompt_becomes_an_additional_history(model: art.Model) -> None:
    async def rollout() -> art.Trajectory:
        messages = await run_agent("What is (2 + 3) * 4?")
        verdict = await init_chat_model(temperature=0.0).ainvoke(
            [SystemMessage("You are a critic."), HumanMessage(str(messages[-1].content))]
        )
        return art.Trajectory(
            messages_and_choices=[], reward=1.0 if verdict.content == "Looks right." else 0.0
        )

    trajectory = await wrap_rollout(model, rollout)()

    assert len(trajectory.messages_and_choices) == 7
    (critic,) = trajectory.additional_histories
    assert [m["role"] for m in critic.messages()] == ["system", "user", "assistant"]
    assert critic.messages()[1]["content"] == "The answer is 20."
    assert isinstance(critic.messages_and_choices[-1], Choice) and critic.tools is None
    assert trajectory.reward == 1.0 and trajectory.num_trainable_turns() == 4


async def test_sync_invoke_is_captured_too(model: art.Model) -> None:
    async def rollout() -> art.Trajectory:
        chat = init_chat_model()
        reply = await asyncio.to_thread(
            chat.invoke, [SystemMessage("You are a critic."), HumanMessage("2+2=4")]
        )
        assert reply.content == "Looks right."
        return art.Trajectory(messages_and_choices=[])

    trajectory = await wrap_rollout(model, rollout)()
    assert [m["content"] for m in trajectory.messages()] == ["You are a critic.", "2+2=4", "Looks right."]


async def test_a_failing_rollout_counts_toward_the_budget_and_keeps_its_calls(model: art.Model) -> None:
    async def rollout(question: str, fail: bool) -> art.Trajectory:
        await run_agent(question, fail=fail)
        return art.Trajectory(messages_and_choices=[], reward=1.0)

    wrapped = wrap_rollout(model, rollout)
    questions = [f"What is (2 + 3) * 4? (#{i})" for i in range(3)]
    (group,) = await art.gather_trajectory_groups(
        [art.TrajectoryGroup(wrapped(q, fail=(i == 1)) for i, q in enumerate(questions))],
        pbar_desc=None,
        max_exceptions=1,
    )

    # Concurrent rollouts did not mix: each trajectory holds its own question only.
    assert sorted(t.messages()[1]["content"] for t in group.trajectories) == [questions[0], questions[2]]
    (error,) = group.exceptions
    assert error.type == "RuntimeError" and error.message == "multiply exploded"
    (kept,) = list((model.storage.root / "langgraph").glob("*.jsonl"))
    assert str(kept) in error.traceback  # the note names the log
    calls = read_call_log(kept)
    assert len(calls) == 2 and all(c.ok for c in calls)
    assert json.loads(kept.read_text().splitlines()[0])["request"]["messages"][1]["content"] == questions[1]
    partial = load_trajectory(kept)
    assert [m["role"] for m in partial.messages()] == ["system", "user", "assistant", "tool", "assistant"]
    assert partial.num_trainable_turns() == 2

    with pytest.raises(RuntimeError, match="multiply exploded"):  # the rollout's own, as the reference
        await art.gather_trajectory_groups(
            [art.TrajectoryGroup(wrapped(q, fail=True) for q in questions[:2])],
            pbar_desc=None,
            max_exceptions=1,
        )


async def test_init_chat_model_outside_a_wrapped_rollout_says_what_to_do(model: art.Model) -> None:
    with pytest.raises(RuntimeError, match=r"inside the function you pass to art\.langgraph\.wrap_rollout"):
        init_chat_model()

    async def pointed_elsewhere() -> art.Trajectory:
        init_chat_model(base_url="https://api.openai.com/v1")
        return art.Trajectory(messages_and_choices=[])

    with pytest.raises(TypeError, match="base_url cannot be set"):
        await wrap_rollout(model, pointed_elsewhere)()

    async def returns_text() -> str:
        return "not a trajectory"

    with pytest.raises(TypeError, match=r"must return an art\.Trajectory"):
        await wrap_rollout(model, returns_text)()  # type: ignore[arg-type]


class Answer(BaseModel):
    """The structured answer the agent gives at the end."""

    value: int
    explanation: str


async def test_structured_output_replies_are_captured_as_trainable_turns(
    model: art.Model, scripted_server: ScriptedServer
) -> None:
    answer_json = '{"value": 20, "explanation": "(2 + 3) * 4"}'
    scripted_server.engine.script = lambda prompt: (
        answer_json if "The answer is 20.<|im_end|>" in prompt else calculator_script(prompt)
    )
    answers: list[Any] = []

    async def rollout() -> art.Trajectory:
        messages = await run_agent("What is (2 + 3) * 4?")
        answer = await init_chat_model().with_structured_output(Answer).ainvoke(messages)
        answers.append(answer)
        return art.Trajectory(messages_and_choices=[], reward=float(answer.value == 20))

    trajectory = await wrap_rollout(model, rollout)()

    assert answers == [Answer(value=20, explanation="(2 + 3) * 4")]
    # The structured call continued the agent's conversation: one more trainable turn at its end.
    last = trajectory.messages_and_choices[-1]
    assert isinstance(last, Choice) and last.message.content == answer_json
    assert len(trajectory.messages_and_choices) == 8 and trajectory.num_trainable_turns() == 4
    assert trajectory.reward == 1.0
