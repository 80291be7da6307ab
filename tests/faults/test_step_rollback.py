"""A step that fails after the trainer changed is undone: the trainer is back at the served checkpoint
(adapter weights and optimizer state), a committed checkpoint is set aside, the error says what failed and
what was rolled back, inference goes on, and the next step trains."""

from __future__ import annotations

import errno
import json
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("torch")

import torch
from faults_loop import make_model, play_step

import art
from art.local import LocalBackend
from art.record.storage import read_groups_file
from art.service.service import CanaryError, ModelService, StepError
from art.types import RuntimeOptions

# The lifecycle is under test, not the speed-ups: skip compiling kernels (seconds of CPU per process).
FAST = RuntimeOptions(dtype="float32", train_compile=False, engine_compile="off")
LR = art.TrainConfig(learning_rate=1e-2)


def trainer_state(service: ModelService) -> dict[str, Any]:
    """Every LoRA parameter and AdamW moment of the service's trainer, copied."""
    assert service.trainer is not None
    state: dict[str, Any] = {"optimizer_steps": service.trainer.optimizer_steps}
    for name, param in service.trainer.named_params:
        state[name] = param.detach().clone()
        for key, value in service.trainer.optimizer.state.get(param, {}).items():
            state[f"{name}.{key}"] = value.clone()
    return state


def assert_same_state(after: dict[str, Any], before: dict[str, Any]) -> None:
    assert after.keys() == before.keys()
    for key, value in before.items():
        same = torch.equal(after[key], value) if isinstance(value, torch.Tensor) else after[key] == value
        assert same, f"{key} differs from the last good checkpoint's"


async def served_step(model: art.TrainableModel) -> int:
    response = await model.openai_client().chat.completions.create(
        model=model.name,
        messages=[{"role": "user", "content": "hi"}],
        max_tokens=2,  # the alias: what users get
    )
    return int(response.choices[0].model_extra["checkpoint_step"])  # type: ignore[index]


async def test_a_failed_canary_rolls_back_weights_and_optimizer_and_the_next_step_trains(
    tiny_model_path: Path, tmp_path: Path
) -> None:
    model = make_model(tmp_path, tiny_model_path)
    async with LocalBackend(progress=False, options=FAST) as backend:
        await model.register(backend)
        service = backend.service(model)
        assert (await model.train(await play_step(model, 0), config=LR)).step == 1  # AdamW has moments now
        before = trainer_state(service)
        assert before["optimizer_steps"] == 1

        # The engine disagrees with the trainer in memory: it serves step 2 from checkpoint 1's weights.
        real_load = service._load_into_engine

        def stale_load(step: int) -> None:
            assert service.adapters is not None
            service.adapters.load(step, path=model.storage.checkpoint_dir(step - 1))

        service._load_into_engine = stale_load  # type: ignore[method-assign]
        groups = await play_step(model, 1)
        with pytest.raises(CanaryError) as caught:
            await model.train(groups, config=LR)
        message = str(caught.value)
        assert message.startswith("canary failed for loop@2"), message
        assert (
            "Rolled back: the trainer is back at checkpoint 1 (adapter weights and optimizer state)"
            in message
        )
        assert "loop@1 is still served" in message and "/checkpoints/rejected/0002-" in message
        assert "The next step will be step 2 again" in message
        assert caught.value.restored_step == 1 and caught.value.phase == "the canary"

        assert_same_state(trainer_state(service), before)
        assert await model.get_step() == 1 and await served_step(model) == 1
        assert "loop@2" not in service.engine.model_names()  # type: ignore[union-attr]
        assert model.storage.checkpoint_steps() == [0, 1]
        (rejected,) = model.storage.rejected_checkpoints()
        assert rejected == caught.value.rejected_path
        assert "canary failed" in json.loads((rejected / "rejection.json").read_text())["reason"]
        assert (
            read_groups_file(rejected / "trained_groups.jsonl.gz") == groups
        )  # kept with what it trained on
        assert model.storage.read_groups("train", 1)[-len(groups) :] == groups  # and logged: nothing lost

        service._load_into_engine = real_load  # type: ignore[method-assign]
        result = await model.train(await play_step(model, 2), config=LR)
        assert result.step == 2 and result.metrics["canary_logprob_diff"] < 1e-3
        assert model.storage.checkpoint_steps() == [0, 1, 2] and await served_step(model) == 2
        assert service.trainer is not None and service.trainer.optimizer_steps == 2


async def test_a_failed_save_or_load_rolls_back_and_a_failed_rollback_stops_training_until_restart(
    tiny_model_path: Path, tmp_path: Path
) -> None:
    model = make_model(tmp_path, tiny_model_path)
    async with LocalBackend(progress=False, options=FAST) as backend:
        await model.register(backend)
        service = backend.service(model)
        trainer, engine = service.trainer, service.engine
        assert trainer is not None and engine is not None
        assert (await model.train(await play_step(model, 0), config=LR)).step == 1
        before = trainer_state(service)

        def disk_full(path: Path) -> None:
            (Path(path) / "adapter_model.safetensors").write_bytes(b"half")
            raise OSError(errno.ENOSPC, "No space left on device")

        trainer.save = disk_full  # type: ignore[method-assign]
        with pytest.raises(
            StepError,
            match=r"step 2 failed while saving its checkpoint: the disk refused a write: No space left on device "
            r"\(ENOSPC\)\. Rolled back: the trainer is back at checkpoint 1 .* nothing of step 2 was saved",
        ):
            await model.train(await play_step(model, 1), config=LR)
        del trainer.save
        assert_same_state(trainer_state(service), before)
        assert (
            not list(model.storage.checkpoints_dir.glob(".tmp-*"))
            and not model.storage.rejected_checkpoints()
        )

        def out_of_memory(*args: object, **kwargs: object) -> None:
            raise RuntimeError("the engine is out of memory")

        engine.load_adapter = out_of_memory  # type: ignore[method-assign]
        with pytest.raises(
            StepError,
            match=r"step 2 failed while loading its adapter into the engine: RuntimeError: the engine is out of "
            r"memory\. Rolled back: .* checkpoint 2 was set aside in .*rejected/0002-",
        ):
            await model.train(await play_step(model, 1), config=LR)
        del engine.load_adapter
        assert_same_state(trainer_state(service), before)
        assert model.storage.checkpoint_steps() == [0, 1] and len(model.storage.rejected_checkpoints()) == 1
        assert (await model.train(await play_step(model, 2), config=LR)).step == 2

        # The rollback itself fails: no more training until a restart; inference goes on.
        async def canary_fails(step: int) -> tuple[float, float]:
            raise CanaryError(f"canary failed for loop@{step}: made up")

        def unreadable(step: int) -> None:
            raise OSError(errno.EIO, "Input/output error")

        service._canary = canary_fails  # type: ignore[method-assign]
        service._restore_trainer = unreadable  # type: ignore[method-assign]
        with pytest.raises(StepError, match=r"rolling back to checkpoint 2 failed too \(OSError: .*restart"):
            await model.train(await play_step(model, 3), config=LR)
        with pytest.raises(RuntimeError, match=r"could not undo failed step 3 .*restart it"):
            await model.train(await play_step(model, 3), config=LR)
        assert await served_step(model) == 2
