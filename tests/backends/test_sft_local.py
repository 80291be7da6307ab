"""Supervised fine-tuning through LocalBackend: real engine, server and trainer on tiny models made here."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("torch", reason="needs the `local` extra: pip install -e '.[local]'")

from safetensors.torch import load_file

import art
from art.local import LocalBackend
from art.testing.tiny_model import make_tiny_model
from art.utils.sft import create_lr_schedule

TARGETS = [("What is the digit?", "7"), ("The quick brown fox", "dog")]


def example(question: str, answer: str) -> art.Trajectory:
    return art.Trajectory(
        messages_and_choices=[{"role": "user", "content": question}, {"role": "assistant", "content": answer}]
    )


@pytest.fixture(scope="module")
def learnable_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    # A trained model's embedding spread and hidden size 128, so an adapter can memorise two answers fast.
    return make_tiny_model(
        tmp_path_factory.mktemp("sft-learnable"), embedding_std=0.1, hidden_size=128, intermediate_size=256
    )


async def greedy(model: art.TrainableModel, question: str) -> str:
    response = await model.openai_client().chat.completions.create(
        model=model.get_inference_name(),
        messages=[{"role": "user", "content": question}],
        max_tokens=6,
        temperature=0.0,
    )
    return response.choices[0].message.content or ""


def adam_step_counts(checkpoint: Path) -> set[float]:
    state = load_file(str(checkpoint / "optimizer.safetensors"))
    return {float(v) for k, v in state.items() if k.endswith(".step")}


@pytest.mark.slow
@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
async def test_sft_teaches_the_served_model_its_answers(
    dtype: str, learnable_path: Path, tmp_path: Path
) -> None:
    """In both dtypes on any host (bf16 is emulated where the CPU lacks it). In bf16 this failed (['7', '7'])
    until the LM head's backward stopped taking 1 - p_target from the bf16 softmax (issue 40)."""
    model = art.TrainableModel(
        name="sft", project="t", base_model=str(learnable_path), base_path=str(tmp_path)
    )
    async with LocalBackend(progress=False, dtype=dtype) as backend:
        await model.register(backend)
        assert [await greedy(model, q) for q, _ in TARGETS] != [a for _, a in TARGETS]
        # 40 steps from 8e-3: both answers in 95 of 96 LoRA seeds x dtypes; the 20 from 1.5e-2 used before
        # taught them in 75 of 96 (a plateau: one answer for both) and missed on an H200 in bf16
        # (benchmarks/sft_seeds.py, benchmarks/results/sft_seeds-avx512-no-bf16-2026-11-26.txt).
        data = [example(q, a) for q, a in TARGETS] * 40
        schedule = create_lr_schedule(40, 8e-3, "linear", min_lr=5e-4)
        result = await model.train_sft(data, art.TrainSFTConfig(learning_rate=schedule, batch_size=2))
        # One call: 40 optimiser steps, one checkpoint, served and checked like an RL step.
        assert result.step == 1 and model.get_inference_name() == "sft@1"
        losses = [m["loss"] for m in result.batch_metrics]
        assert len(losses) == 40 and losses[-1] < 0.05 * losses[0], losses
        assert [m["learning_rate"] for m in result.batch_metrics] == schedule
        assert result.metrics["canary_logprob_diff"] < 0.05
        assert result.metrics["data/step_num_gradient_steps"] == 40
        assert result.metrics["loss/train"] == pytest.approx(sum(losses) / 40)
        assert [await greedy(model, q) for q, _ in TARGETS] == [a for _, a in TARGETS]
        history = model.history()
        assert [e["step"] for e in history] == [1]
        assert {"loss/train", "loss/learning_rate", "data/step_trainer_tokens", "time/step_trainer_s"} <= set(
            history[0]
        )
        assert adam_step_counts(model.storage.checkpoint_dir(1)) == {40.0}

        # RL on the same adapter starts from fresh AdamW moments (the reference's rule), then keeps them.
        group = art.TrajectoryGroup(
            [
                art.Trajectory(
                    messages_and_choices=[{"role": "user", "content": q}, await sample(model, q)],
                    reward=reward,
                )
                for q, _ in TARGETS
                for reward in (1.0, 0.0)
            ]
        )
        rl = await model.train([group], config=art.TrainConfig(learning_rate=1e-4))
        assert rl.step == 2 and rl.metrics["optimizer_reset"] == 1.0
        assert adam_step_counts(model.storage.checkpoint_dir(2)) == {1.0}
        again = await model.train_sft(data[:2], art.TrainSFTConfig(learning_rate=1e-3, batch_size=2))
        assert again.step == 3 and again.batch_metrics[0]["optimizer_reset"] == 1.0
        assert adam_step_counts(model.storage.checkpoint_dir(3)) == {1.0}


async def sample(model: art.TrainableModel, question: str) -> Any:
    response = await model.openai_client().chat.completions.create(
        model=model.get_inference_name(), messages=[{"role": "user", "content": question}], max_tokens=4
    )
    return response.choices[0]


async def test_bad_data_mid_stream_publishes_nothing(tiny_model_path: Path, tmp_path: Path) -> None:
    model = art.TrainableModel(
        name="bad", project="t", base_model=str(tiny_model_path), base_path=str(tmp_path)
    )

    def stream(bad_at: int) -> Iterator[art.Trajectory]:
        for i in range(6):
            if i == bad_at:
                yield art.Trajectory(messages_and_choices=[{"role": "user", "content": "no answer"}])
            else:
                yield example("What is the digit?", str(i))

    async with LocalBackend(progress=False, dtype="float32") as backend:
        await model.register(backend)
        service = backend.service(model)
        assert service.trainer is not None
        with pytest.raises(ValueError, match=r"trajectories\[4\]: messages_and_choices\[0\].role is 'user'"):
            await model.train_sft(stream(bad_at=4), art.TrainSFTConfig(learning_rate=5e-2, batch_size=2))
        # Two batches had trained before the bad one: the trainer went back to the published step 0.
        assert await model.get_step() == 0 and model.history() == []
        assert model.storage.checkpoint_steps() == [0]
        assert all(float(p.abs().max()) == 0.0 for n, p in service.trainer.named_params if "lora_B" in n)
        assert service.trainer.optimizer.state == {}
        # skip_invalid: the same stream trains, the bad conversation counted and named
        result = await model.train_sft(
            stream(bad_at=4),
            art.TrainSFTConfig(learning_rate=5e-2, batch_size=2),
            _config={"skip_invalid": True},
        )
        assert result.step == 1 and result.metrics["canary_logprob_diff"] < 1e-3
        assert result.metrics["data/step_num_dropped_trajectories"] == 1
        assert [m["num_trajectories"] for m in result.batch_metrics] == [2, 2, 1]
        assert result.message is not None and "trajectories[4]" in result.message
