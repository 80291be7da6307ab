"""On start the newest checkpoint is checked before it is served: one corrupted on disk is set aside, with a
warning, and the previous one served (and the next step trains); when the engine itself disagrees with the
trainer, nothing is set aside and the start fails saying so."""

from __future__ import annotations

import asyncio
import logging
import shutil
from pathlib import Path

import pytest

pytest.importorskip("torch")

import peft
import torch
from faults_loop import make_model, play_step
from safetensors.torch import load_file, save_file
from test_step_rollback import FAST, LR, served_step

from art.local import LocalBackend


@pytest.fixture(scope="module")
def trained_run(tmp_path_factory: pytest.TempPathFactory, tiny_model_path: Path) -> Path:
    """A record with checkpoints 0, 1 and 2 (trained once for the module; each test works on a copy)."""
    base_path = tmp_path_factory.mktemp("trained-run")

    async def train_two_steps() -> None:
        model = make_model(base_path, tiny_model_path)
        async with LocalBackend(progress=False, options=FAST) as backend:
            await model.register(backend)
            for step in range(2):
                await model.train(await play_step(model, step), config=LR)
            await model.openai_client().close()  # this event loop ends here

    asyncio.run(train_two_steps())
    return base_path


def copy_of(trained_run: Path, tmp_path: Path) -> Path:
    shutil.copytree(trained_run, tmp_path / "art")
    return tmp_path / "art"


async def test_a_corrupted_newest_checkpoint_is_set_aside_and_the_previous_one_served(
    trained_run: Path, tmp_path: Path, tiny_model_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    model = make_model(copy_of(trained_run, tmp_path), tiny_model_path)
    # A valid safetensors file with wrong weights (x50 + 0.5): both the trainer and the engine would load it.
    adapter = model.storage.checkpoint_dir(2) / "adapter_model.safetensors"
    save_file({k: v * 50 + 0.5 for k, v in load_file(adapter).items()}, adapter, metadata={"format": "pt"})
    async with LocalBackend(progress=False, options=FAST) as backend:
        with caplog.at_level(logging.WARNING):
            await model.register(backend)
        assert "checkpoint 2 of 'loop' failed its check at start (CheckpointCorruptError" in caplog.text
        assert "adapter_model.safetensors changed since it was saved" in caplog.text
        assert "Serving step 1 instead" in caplog.text
        assert await model.get_step() == 1 and await served_step(model) == 1
        assert model.storage.checkpoint_steps() == [0, 1]
        (rejected,) = model.storage.rejected_checkpoints()
        assert rejected.name.startswith("0002-") and (rejected / "adapter_model.safetensors").exists()
        trainer = backend.service(model).trainer
        assert trainer is not None  # the trainer holds checkpoint 1's adapter, not the corrupted one
        saved = load_file(model.storage.checkpoint_dir(1) / "adapter_model.safetensors")
        for key, value in peft.get_peft_model_state_dict(trainer.model).items():
            assert torch.equal(value, saved[key]), key
        result = await model.train(await play_step(model, 5), config=LR)
        assert result.step == 2 and model.storage.checkpoint_steps() == [0, 1, 2]
        model.storage.verify_checkpoint(2)


async def test_an_engine_that_disagrees_at_start_fails_it_and_sets_nothing_aside(
    trained_run: Path, tmp_path: Path, tiny_model_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import art.engines.torch.llama_forward as llama_forward

    model = make_model(copy_of(trained_run, tmp_path), tiny_model_path)
    monkeypatch.setattr(llama_forward, "fold_layers", lambda base, *a: base)  # generation drops adapters
    async with LocalBackend(
        progress=False, options=FAST.model_copy(update={"engine_compile": "on"})
    ) as backend:
        with pytest.raises(
            RuntimeError, match=r"no checkpoint of 'loop' can be served as trained: .*Nothing was set aside"
        ):
            await model.register(backend)
    assert model.storage.checkpoint_steps() == [0, 1, 2] and model.storage.rejected_checkpoints() == []


async def test_a_corrupted_checkpoint_and_a_torn_history_line_lose_nothing_logged_after_the_restart(
    trained_run: Path, tmp_path: Path, tiny_model_path: Path
) -> None:
    model = make_model(copy_of(trained_run, tmp_path), tiny_model_path)
    adapter = model.storage.checkpoint_dir(2) / "adapter_model.safetensors"
    save_file({k: v * 50 + 0.5 for k, v in load_file(adapter).items()}, adapter, metadata={"format": "pt"})
    history = model.storage.history_path
    data = history.read_bytes()
    history.write_bytes(data[: len(data) - 10])  # the crash also tore step 2's history line
    async with LocalBackend(progress=False, options=FAST) as backend:
        with pytest.warns(UserWarning):
            await model.register(backend)
        assert await model.get_step() == 1
        await model.log(metrics={"after_restart": 0.25}, split="val")
        result = await model.train(await play_step(model, 5), config=LR)
        assert result.step == 2
    with pytest.warns(UserWarning, match="history.jsonl: line"):  # the torn fragment is still skipped
        entries = model.storage.read_history()
    assert any(e["step"] == 1 and e.get("val/after_restart") == 0.25 for e in entries), entries
    trained_after = [e for e in entries if e["step"] == 2 and any("loss" in k for k in e)]
    assert trained_after, entries
