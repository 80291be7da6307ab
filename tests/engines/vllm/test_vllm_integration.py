"""engine="vllm" with the real vLLM (its CPU build here): two training steps of a tiny model, end to end.

Runs where a Python with vLLM is found (`helpers_vllm.find_vllm_python`: the README's test command makes
the venv first). Skipped with the reason otherwise. Takes a few
minutes on 2 CPU cores (vLLM starts twice: once more after its server is killed).
"""

from __future__ import annotations

import math
import os
import signal
from pathlib import Path
from typing import Any

import httpx
import pytest
from helpers_vllm import SKIP_REASON, find_vllm_python

import art
from art.engines.vllm.process_group import members
from art.types import RuntimeOptions

VLLM_PYTHON = find_vllm_python()
pytestmark = [pytest.mark.skipif(VLLM_PYTHON is None, reason=SKIP_REASON), pytest.mark.timeout(1800)]

PROMPT = [{"role": "user", "content": "Say a number."}]


@pytest.fixture(scope="module")
def vllm_tiny_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """vLLM's CPU attention wants a usual head size: a tiny Llama with heads of 64."""
    pytest.importorskip("torch")
    from art.testing.tiny_model import make_tiny_model

    return make_tiny_model(
        tmp_path_factory.mktemp("tiny-llama-h64"), hidden_size=256, num_heads=4, num_kv_heads=2
    )


def _backend() -> art.LocalBackend:
    options = RuntimeOptions(
        engine="vllm",
        device="cpu",
        dtype="float32",
        vllm_python=VLLM_PYTHON,
        max_model_len=512,
        max_num_seqs=8,
        vllm_env={"VLLM_CPU_KVCACHE_SPACE": "1"},
        train_compile=False,  # inductor's first build took 16 minutes on a loaded 2-core host; not tested here
    )
    return art.LocalBackend(options=options)


async def _group(model: art.TrainableModel, step: int, size: int = 4) -> art.TrajectoryGroup:
    client = model.openai_client()
    trajectories = []
    for i in range(size):
        reply = await client.chat.completions.create(
            model=model.get_inference_name(step), messages=PROMPT, max_tokens=6, temperature=1.0, seed=i
        )
        choice = reply.choices[0]
        trajectories.append(
            art.Trajectory(
                messages_and_choices=[*PROMPT, choice], reward=float(len(choice.message.content or ""))
            )
        )
    return art.TrajectoryGroup(trajectories)


async def test_two_steps_with_vllm_then_a_crash_and_a_restart(vllm_tiny_model: Path, tmp_path: Path) -> None:
    from art.training.tokenize import TrajectoryTokenizer

    backend = _backend()
    model = art.TrainableModel(
        name="agent", project="p", base_model=str(vllm_tiny_model), base_path=str(tmp_path)
    )
    await model.register(backend)
    service = backend.service(model)
    try:
        for step in (1, 2):
            groups = [await _group(model, step - 1), await _group(model, step - 1)]
            # Token ids: what vLLM sampled is what the trainer trains on and re-scores.
            trajectory = groups[0].trajectories[0]
            choice: Any = trajectory.messages_and_choices[-1]
            sampled = choice.model_extra["token_ids"]
            assert choice.model_extra["checkpoint_step"] == step - 1
            assert [e.token for e in choice.logprobs.content] == [f"token_id:{t}" for t in sampled]
            assert service.trainer is not None and service.engine is not None
            (sequence,), stats = TrajectoryTokenizer(service.engine.chat_template).tokenize_trajectory(
                trajectory
            )
            assert stats.retokenized_turns == 0
            trained_ids = [t for t, m in zip(sequence.token_ids, sequence.assistant_mask, strict=True) if m]
            assert trained_ids == sampled
            rescored = service.trainer.logprobs(sequence.token_ids)
            masked = [r for r, m in zip(rescored, sequence.assistant_mask[1:], strict=True) if m]
            sampled_lps = [e.logprob for e in choice.logprobs.content]
            assert max(abs(a - b) for a, b in zip(masked, sampled_lps, strict=True)) < 0.02

            result = await backend.train(model, groups, learning_rate=5e-2)
            assert result.step == step, result.message
            assert math.isfinite(result.metrics["canary_logprob_diff"])
            assert result.metrics["canary_logprob_diff"] < 1e-3  # float32 on both sides
        names = [m.id for m in (await model.openai_client().models.list()).data]
        assert {"agent", "agent@2"} <= set(names)
        reply = await model.openai_client().chat.completions.create(
            model="agent", messages=PROMPT, max_tokens=3
        )
        assert (
            reply.choices[0].model_extra is not None and reply.choices[0].model_extra["checkpoint_step"] == 2
        )

        # vLLM's API server dies (its engine core lives on): a request gets a 503 naming the cause; close()
        # stops the rest of its process group; a new backend resumes from step 2.
        pgid = service.engine.server.process.pid  # type: ignore[attr-defined]
        assert len(members(pgid)) > 1  # the server and its engine core
        os.kill(pgid, signal.SIGKILL)
        service.engine.server.process.wait(60)  # type: ignore[attr-defined]
        assert members(pgid), "vLLM's engine core outlives its server"
        async with httpx.AsyncClient() as client:
            answer = await client.post(
                f"{model.inference_base_url}/chat/completions",
                headers={"Authorization": f"Bearer {model.inference_api_key}"},
                json={"model": "agent", "messages": PROMPT},
            )
        assert answer.status_code == 503 and "exited with code -9" in answer.json()["error"]["message"]
    finally:
        await backend.close()
    assert members(pgid) == [], "close() left vLLM processes running"

    again = _backend()
    model = art.TrainableModel(
        name="agent", project="p", base_model=str(vllm_tiny_model), base_path=str(tmp_path)
    )
    await model.register(again)
    try:
        assert await model.get_step() == 2
        reply = await model.openai_client().chat.completions.create(
            model=model.get_inference_name(), messages=PROMPT, max_tokens=3
        )
        assert (
            reply.choices[0].model_extra is not None and reply.choices[0].model_extra["checkpoint_step"] == 2
        )
    finally:
        await again.close()


async def test_on_devices_of_its_own_vllm_answers_while_a_step_trains(
    vllm_tiny_model: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Dedicated mode's promise (`trainer_gpu_ids` / `inference_gpu_ids`): inference is not held while a step
    trains. No GPUs here, so the plan dedicated GPUs get (`pause_while_training=False`) is given to a CPU
    service; the real vLLM must then answer a chat while the trainer is in the middle of the step (the trainer
    waits for that answer: with inference held, as on a shared device, the step and the chat would both wait)."""
    import asyncio
    import dataclasses
    import threading

    from art.cluster import scale_out

    shared_plan = scale_out.plan

    def plan_of_dedicated_devices(*args: Any) -> Any:
        return dataclasses.replace(shared_plan(*args), pause_while_training=False)

    monkeypatch.setattr(scale_out, "plan", plan_of_dedicated_devices)
    backend = _backend()
    model = art.TrainableModel(
        name="agent", project="p", base_model=str(vllm_tiny_model), base_path=str(tmp_path)
    )
    await model.register(backend)
    try:
        groups = [await _group(model, 0), await _group(model, 0)]
        trainer = backend.service(model).trainer
        assert trainer is not None
        training, answered = threading.Event(), threading.Event()
        train_step = trainer.train_step

        def step_that_waits_for_an_answer(*args: Any, **kwargs: Any) -> Any:
            training.set()
            assert answered.wait(90), "no chat was answered while the step trained"
            return train_step(*args, **kwargs)

        monkeypatch.setattr(trainer, "train_step", step_that_waits_for_an_answer)
        step = asyncio.create_task(backend.train(model, groups, learning_rate=5e-2))
        assert await asyncio.to_thread(training.wait, 60)
        reply = await asyncio.wait_for(
            model.openai_client().chat.completions.create(
                model=model.get_inference_name(0), messages=PROMPT, max_tokens=3
            ),
            60,
        )
        assert not step.done() and reply.choices[0].message.content is not None
        answered.set()
        assert (await step).step == 1
    finally:
        await backend.close()
