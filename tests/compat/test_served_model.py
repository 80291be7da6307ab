"""The reference's helpers against a real served model: `capture_auto_trajectory` (streamed and not, sync
and async clients, several conversations), LiteLLM through `model.litellm_completion_params()` and
`convert_litellm_choice_to_openai`, and `art.dev` settings applied by `LocalBackend`."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import openai
import pytest
import pytest_asyncio

import art
from art.local import LocalBackend

pytestmark = pytest.mark.asyncio(loop_scope="module")

USER = {"role": "user", "content": "A. Who did it?"}


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def model(
    compat_model_path: Path, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[art.TrainableModel]:
    served = art.TrainableModel(
        name="served",
        project="compat",
        base_model=str(compat_model_path),
        _internal_config=art.dev.InternalModelConfig(
            init_args=art.dev.InitArgs(max_seq_length=384), engine_args=art.dev.EngineArgs(max_num_seqs=6)
        ),
    )
    async with LocalBackend(path=str(tmp_path_factory.mktemp("served")), progress=False) as backend:
        await served.register(backend)
        yield served


async def test_internal_config_sets_the_engine(model: art.TrainableModel) -> None:
    backend = model.backend()
    assert isinstance(backend, LocalBackend)
    engine = backend.service(model).engine
    assert engine is not None and engine.max_model_len == 384
    assert backend.service(model).config.options.max_num_seqs == 6


async def test_capture_auto_trajectory_records_every_turn(model: art.TrainableModel) -> None:
    async def agent() -> None:
        client = model.openai_client()
        messages: list[dict[str, object]] = [{"role": "system", "content": "Be brief."}, USER]
        first = await client.chat.completions.create(
            model=model.get_inference_name(),
            messages=messages,
            max_tokens=6,  # type: ignore[arg-type]
        )
        messages += [
            first.choices[0].message.model_dump(exclude_none=True),
            {"role": "user", "content": "B. Where?"},
        ]
        stream = await client.chat.completions.create(
            model=model.get_inference_name(),
            messages=messages,
            max_tokens=6,
            stream=True,  # type: ignore[arg-type]
        )
        async for _ in stream:
            pass
        # another conversation (a sub-agent): its own history
        await client.chat.completions.create(
            model=model.get_inference_name(),
            messages=[{"role": "user", "content": "Side question"}],
            max_tokens=3,  # type: ignore[list-item]
        )
        art.auto_trajectory(required=True).reward = 0.75

    trajectory = await art.capture_auto_trajectory(agent())
    roles = [m["role"] for m in trajectory.messages()]
    assert roles == ["system", "user", "assistant", "user", "assistant"]
    assert trajectory.reward == 0.75 and trajectory.metrics["duration"] > 0
    assert len(trajectory.additional_histories) == 1
    assert [m["role"] for m in trajectory.additional_histories[0].messages()] == ["user", "assistant"]
    # both sampled turns are trainable: logprobs and the exact token ids, the streamed one included
    assert trajectory.num_trainable_turns() == 3
    for item in (trajectory.messages_and_choices[2], trajectory.messages_and_choices[4]):
        extra = item.model_extra or {}  # type: ignore[union-attr]
        assert extra["checkpoint_step"] == 0
        assert len(extra["token_ids"]) == len(item.logprobs.content)  # type: ignore[union-attr]
    # and they train: the backend accepts the group
    other = await art.capture_auto_trajectory(agent())
    group = art.TrajectoryGroup([trajectory, other.model_copy(update={"reward": 0.0})])
    result = await model.backend().train(model, [group], learning_rate=1e-3)
    assert result.step == 1


async def test_capture_with_the_synchronous_client(model: art.TrainableModel) -> None:
    async def agent() -> None:
        with openai.OpenAI(base_url=model.inference_base_url, api_key=model.inference_api_key) as client:
            client.chat.completions.create(model=model.get_inference_name(), messages=[USER], max_tokens=4)  # type: ignore[list-item]

    trajectory = await art.capture_auto_trajectory(agent())
    assert [m["role"] for m in trajectory.messages()] == ["user", "assistant"]
    assert trajectory.num_trainable_turns() == 1


async def test_litellm_completion_params_reach_the_served_model(model: art.TrainableModel) -> None:
    litellm = pytest.importorskip("litellm")
    from art.utils.litellm import convert_litellm_choice_to_openai

    response = await litellm.acompletion(
        messages=[USER], max_tokens=4, logprobs=True, **model.litellm_completion_params()
    )
    choice = convert_litellm_choice_to_openai(response.choices[0])
    assert choice.message.role == "assistant" and choice.logprobs is not None
    trajectory = art.Trajectory(messages_and_choices=[USER, choice], reward=1.0)
    assert trajectory.num_trainable_turns() == 1
