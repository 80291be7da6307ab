"""`await model.register(backend)` checks the base model before it writes anything, and a registration that
fails for any reason leaves no record behind: the next one with a corrected base model starts clean."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from huggingface_hub import constants

import art
from art.common.errors import BaseModelNotFoundError, ModelAlreadyRegisteredError
from art.local import LocalBackend
from art.record.lock import RecordLock
from art.record.storage import ModelStorage
from art.record.undo import RegistrationUndo
from art.types import Registration


@pytest.fixture
def no_writes(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """Every write of a model.json, recorded (a check that came too late shows up here)."""
    writes: list[Any] = []
    real = ModelStorage.write_model_json

    def spy(self: ModelStorage, data: dict[str, Any]) -> None:
        writes.append(data)
        real(self, data)

    monkeypatch.setattr(ModelStorage, "write_model_json", spy)
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    return writes


@pytest.mark.parametrize(
    ("base_model", "says"),
    [
        ("/nonexistent-model-dir", "no folder /nonexistent-model-dir"),
        ("qwen-does-not-exist", "unknown name: not a short name (known: smollm2-135m"),
        ("Qwen/Qwen2.5-0.5B-Instruct", "not in the Hugging Face cache"),
    ],
)
async def test_a_base_model_that_is_not_there_is_refused_before_anything_is_written(
    base_model: str, says: str, tmp_path: Path, no_writes: list[Any]
) -> None:
    base = tmp_path / ".art"
    model = art.TrainableModel(name="agent", project="p", base_model=base_model, base_path=str(base))
    backend = LocalBackend()
    try:
        with pytest.raises(BaseModelNotFoundError) as info:
            await model.register(backend)
    finally:
        await backend.close()
    assert says in str(info.value) and "\n" not in str(info.value)
    assert isinstance(info.value, ValueError)  # code that caught ValueError still does
    assert no_writes == [] and not base.exists()


async def test_a_base_model_that_fails_to_load_leaves_no_record_and_the_next_registration_starts_clean(
    tiny_model_path: Path, tmp_path: Path
) -> None:
    broken = tmp_path / "broken-model"
    shutil.copytree(tiny_model_path, broken)
    for weights in broken.glob("*.safetensors"):
        weights.write_bytes(b"not safetensors")
    base = tmp_path / ".art"
    async with LocalBackend(progress=False) as backend:
        model = art.TrainableModel(name="agent", project="p", base_model=str(broken), base_path=str(base))
        with pytest.raises(Exception):  # noqa: B017 - whatever the loader raises; the record is the point
            await model.register(backend)
        assert not base.exists(), sorted(str(p) for p in base.rglob("*"))
        fixed = art.TrainableModel(
            name="agent", project="p", base_model=str(tiny_model_path), base_path=str(base)
        )
        await fixed.register(backend)  # not "already registered ... with base_model=<the broken one>"
    assert json.loads(fixed.storage.model_json_path.read_text())["base_model"] == str(tiny_model_path)


class FailingBackend(art.Backend):
    """Registers nothing: its `register` fails after the record was written (as a load failure does)."""

    async def register(self, model: art.Model) -> Registration:
        (model.storage.root / "checkpoints").mkdir(parents=True, exist_ok=True)  # what a service writes
        raise RuntimeError("the engine did not start")


async def test_a_failed_registration_of_a_new_model_removes_the_folders_it_made(tmp_path: Path) -> None:
    (tmp_path / ".art" / "p" / "models" / "other").mkdir(parents=True)  # another model: its folders stay
    model = art.TrainableModel(name="agent", project="p", base_model="x", base_path=str(tmp_path / ".art"))
    with pytest.raises(RuntimeError, match="did not start"):
        await model.register(FailingBackend())
    assert not model.storage.root.exists() and (tmp_path / ".art" / "p" / "models" / "other").is_dir()

    fresh = art.TrainableModel(name="agent", project="q", base_model="x", base_path=str(tmp_path / "new"))
    with pytest.raises(RuntimeError):
        await fresh.register(FailingBackend())
    assert not (tmp_path / "new").exists()  # base_path itself was made by it: removed too


async def test_a_failed_registration_of_an_existing_model_puts_its_model_json_back(
    tmp_path: Path, fake_backend: Any
) -> None:
    model = art.TrainableModel(name="agent", project="p", base_model="x", base_path=str(tmp_path))
    await model.register(fake_backend)
    before = model.storage.model_json_path.read_text()
    record = json.loads(before)
    record.pop("lora_config")  # an older registration: the next one adds what is missing
    model.storage.write_model_json(record)
    written = model.storage.model_json_path.read_text()
    again = art.TrainableModel(name="agent", project="p", base_model="x", base_path=str(tmp_path))
    with pytest.raises(RuntimeError):
        await again.register(FailingBackend())  # type: ignore[arg-type]
    assert model.storage.model_json_path.read_text() == written  # as it was, not half-updated
    assert (model.storage.root / "checkpoints").is_dir()  # the record it had is kept


def test_undo_leaves_a_record_another_writer_holds(tmp_path: Path) -> None:
    storage = ModelStorage(tmp_path, "p", "agent")
    undo = RegistrationUndo(storage)
    storage.write_model_json({"name": "agent"})
    lock = RecordLock(storage.root, owner="another service")
    lock.acquire()
    try:
        undo.undo()
    finally:
        lock.release()
    assert storage.model_json_path.exists()


async def test_a_record_of_another_base_model_names_both_ways_out(tmp_path: Path, fake_backend: Any) -> None:
    first = art.TrainableModel(name="agent", project="p", base_model="typo-model", base_path=str(tmp_path))
    await first.register(fake_backend)
    second = art.TrainableModel(name="agent", project="p", base_model="smollm2-135m", base_path=str(tmp_path))
    with pytest.raises(ModelAlreadyRegisteredError) as info:
        await second.register(type(fake_backend)())
    message = str(info.value)
    assert "with base_model='typo-model', not 'smollm2-135m'" in message
    assert "give another name= (or another base_path=)" in message
    assert "register it with base_model='typo-model'" in message
    assert info.value.field == "base_model" and info.value.recorded == "typo-model"
