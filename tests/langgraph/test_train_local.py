"""A wrapped LangGraph ReAct agent (two tools) against our own server on a tiny model, trained for one step.

Everything is real: LocalBackend (engine, server, trainer), LangChain's ChatOpenAI from init_chat_model,
LangGraph's ReAct agent. A random tiny model answers in text (it does not call tools by itself), so each
rollout is a one-turn agent conversation plus a second conversation with another prompt (a critic), which
becomes an additional history; both are trained on.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from agent_helpers import assert_same_conversation, run_agent
from langchain_core.messages import BaseMessage, HumanMessage, SystemMessage
from openai.types.chat.chat_completion import Choice

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
        assert result.metrics["num_assistant_tokens"] > 0
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
