"""A wrapped LangGraph ReAct agent (two tools) against our own server on a tiny model, trained for one step.

Everything is real: LocalBackend (engine, server, trainer), LangChain's ChatOpenAI from init_chat_model,
LangGraph's ReAct agent. A random tiny model answers in text (it does not call tools by itself), so each
rollout is a one-turn agent conversation plus a second conversation with another prompt (a critic), which
becomes an additional history; both are trained on.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

import pytest
from agent_helpers import assert_same_conversation, run_agent
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage
from langchain_core.tools import tool
from langgraph.prebuilt import create_react_agent
from openai.types.chat.chat_completion import Choice
from pydantic import BaseModel

import art
from art.langgraph import init_chat_model, wrap_rollout

pytest.importorskip("torch", reason="needs the `local` extra: pip install -e '.[local]'")

pytestmark = pytest.mark.filterwarnings("ignore:create_react_agent has been moved")


@pytest.mark.slow
async def test_a_wrapped_react_agent_trains_one_step_on_our_server(
    tiny_model_path: Path, tmp_path: Path
) -> None:
    from art.local import LocalBackend

    model = art.TrainableModel(
        name="lg-agent", project="lg", base_model=str(tiny_model_path), base_path=str(tmp_path)
    )
    seen: dict[int, list[BaseMessage]] = {}

    async def rollout(i: int) -> art.Trajectory:
        seen[i] = await run_agent(f"What is {i} + 2?", max_tokens=8, seed=i)
        verdict = await init_chat_model(max_tokens=4, seed=100 + i).ainvoke(
            [SystemMessage("You are a critic."), HumanMessage(str(seen[i][-1].content))]
        )
        return art.Trajectory(
            messages_and_choices=[], reward=float(i), metadata={"verdict": str(verdict.content)}
        )

    async with LocalBackend(progress=False) as backend:
        await model.register(backend)
        wrapped = wrap_rollout(model, rollout)
        (group,) = await art.gather_trajectory_groups(
            [art.TrajectoryGroup(wrapped(i) for i in range(2))], pbar_desc=None
        )

        for trajectory in group.trajectories:
            i = int(trajectory.reward)
            assert [type(m).__name__ for m in seen[i]] == ["SystemMessage", "HumanMessage", "AIMessage"]
            assert_same_conversation(seen[i], trajectory.messages_and_choices)
            assert [t["function"]["name"] for t in trajectory.tools or []] == ["add", "multiply"]
            (critic,) = trajectory.additional_histories
            assert [m["content"] for m in critic.messages()[:2]] == ["You are a critic.", seen[i][-1].content]
            assert critic.messages()[2]["content"] == trajectory.metadata["verdict"]
            assert trajectory.num_trainable_turns() == 2
            choice = trajectory.messages_and_choices[-1]
            assert isinstance(choice, Choice) and choice.model_extra["checkpoint_step"] == 0  # type: ignore[index]

        result = await model.train([group], config=art.TrainConfig(learning_rate=1e-3))
        assert result.step == 1
        assert result.metrics["trainable_trajectories"] == 2
        assert result.metrics["data/step_trainer_tokens"] > 0
        assert model.get_inference_name() == "lg-agent@1"
        (stored,) = model.storage.read_groups("train", 1)
        assert [t.model_dump(mode="json") for t in stored.trajectories] == [
            t.model_dump(mode="json") for t in group.trajectories
        ]
        assert model.history()[-1]["step"] == 1

        # The next rollout's chat model serves the new step.
        after = await wrapped(3)
        choice = after.messages_and_choices[-1]
        assert isinstance(choice, Choice) and choice.model_extra["checkpoint_step"] == 1  # type: ignore[index]


@tool
def capital(country: Literal["France", "Japan"]) -> str:
    """The capital city of a country."""
    return {"France": "Paris", "Japan": "Tokyo"}[country]


@tool
def population(city: Literal["Paris", "Tokyo"]) -> int:
    """The population of a city, in millions."""
    return {"Paris": 2, "Tokyo": 14}[city]


class Verdict(BaseModel):
    """A structured verdict on the agent's work."""

    city: Literal["Paris", "Tokyo"]
    sure: bool


@pytest.mark.slow
async def test_forced_tool_calls_and_structured_output_on_a_tiny_model_train_one_step(
    tiny_model_path: Path, tmp_path: Path
) -> None:
    """The tiny model calls both tools because each turn names the tool it must call (tool_choice), and
    writes schema-valid JSON for with_structured_output (response_format json_schema): the server's
    constrained decoding, not luck."""
    from art.local import LocalBackend

    model = art.TrainableModel(
        name="lg-forced", project="lg", base_model=str(tiny_model_path), base_path=str(tmp_path)
    )
    seen: dict[int, list[BaseMessage]] = {}
    verdicts: dict[int, Verdict] = {}
    tools = [capital, population]

    def choose_model(state: dict[str, Any], runtime: Any) -> Any:
        # Turn 1 must call `capital`, turn 2 `population`, turn 3 answers in text.
        turns = sum(isinstance(m, AIMessage) for m in state["messages"])
        choice = ["capital", "population", "none"][min(turns, 2)]
        # strict: the call's arguments admit no extra keys, so the constrained call ends within max_tokens
        chat = init_chat_model(max_tokens=8 if choice == "none" else 96)
        return chat.bind_tools(tools, tool_choice=choice, strict=True)

    async def rollout(i: int) -> art.Trajectory:
        agent = create_react_agent(choose_model, tools)
        state = await agent.ainvoke(
            {"messages": [SystemMessage("Use the tools."), HumanMessage(f"Question {i}")]}
        )
        seen[i] = list(state["messages"])
        judge = init_chat_model(max_tokens=96).with_structured_output(Verdict, strict=True)
        verdict = await judge.ainvoke(
            [SystemMessage("Judge the answer."), HumanMessage(str(seen[i][-1].content))]
        )
        assert isinstance(verdict, Verdict)
        verdicts[i] = verdict
        return art.Trajectory(messages_and_choices=[], reward=float(i))

    async with LocalBackend(progress=False) as backend:
        await model.register(backend)
        wrapped = wrap_rollout(model, rollout)
        (group,) = await art.gather_trajectory_groups(
            [art.TrajectoryGroup(wrapped(i) for i in range(2))], pbar_desc=None
        )

        assert not group.exceptions, group.exceptions
        for trajectory in group.trajectories:
            i = int(trajectory.reward)
            names = [type(m).__name__ for m in seen[i]]
            assert names == [
                "SystemMessage",
                "HumanMessage",
                "AIMessage",
                "ToolMessage",
                "AIMessage",
                "ToolMessage",
                "AIMessage",
            ]
            assert [c["name"] for m in seen[i] if isinstance(m, AIMessage) for c in m.tool_calls] == [
                "capital",
                "population",
            ]
            assert_same_conversation(seen[i], trajectory.messages_and_choices)
            (judged,) = trajectory.additional_histories
            reply = judged.messages_and_choices[-1]
            assert (
                isinstance(reply, Choice)
                and Verdict.model_validate_json(reply.message.content or "") == verdicts[i]
            )
            assert trajectory.num_trainable_turns() == 4

        result = await model.train([group], config=art.TrainConfig(learning_rate=1e-3))
        assert result.step == 1 and result.metrics["trainable_trajectories"] == 2
