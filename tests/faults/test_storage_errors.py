"""A full disk (fault injection on the record's writes) loses nothing and is reported as what it is (issue
41, D2 U1 item 6): a step that was applied is never reported as failed and its record is written later or
recovered at restart; a step that failed says what the disk said and what was rolled back; set-aside
checkpoints are bounded, listable and purgeable."""

from __future__ import annotations

import errno
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("torch")

from faults_loop import make_model, play_step

import art
import art.record.storage as storage
from art.local import LocalBackend
from art.model import RecordNotWrittenWarning
from art.record.storage import read_groups_file
from art.service.service import StepError
from art.types import RuntimeOptions

FAST = RuntimeOptions(dtype="float32", train_compile=False, engine_compile="off")
LR = art.TrainConfig(learning_rate=1e-2)


def disk_full() -> OSError:
    return OSError(errno.ENOSPC, "No space left on device")


def fail_record_writes(monkeypatch: pytest.MonkeyPatch, model: art.TrainableModel) -> None:
    """Every append to the model's record (trajectories, history) fails as on a full disk; the checkpoint's
    own files are written as usual."""
    real = storage.append_jsonl
    record = (model.storage.root / "trajectories", model.storage.history_path)

    def append_jsonl(path: Path, lines: Any) -> None:
        if path == record[1] or record[0] in path.parents:
            raise disk_full()
        real(path, lines)

    monkeypatch.setattr(storage, "append_jsonl", append_jsonl)


async def first_step_unrecorded(
    model: art.TrainableModel, backend: LocalBackend, monkeypatch: pytest.MonkeyPatch
) -> tuple[list[art.TrajectoryGroup], art.TrainResult]:
    """Register, play and train step 1 while the record's writes fail: the step is returned as trained,
    with a warning; (its groups, its result)."""
    await model.register(backend)
    groups = await play_step(model, 0)
    with monkeypatch.context() as patch:
        fail_record_writes(patch, model)
        with pytest.warns(RecordNotWrittenWarning, match="Step 1 was trained and is served"):
            result = await model.train(groups, config=LR)
    assert result.step == 1 and await model.get_step() == 1
    return groups, result


def train_lines(model: art.TrainableModel) -> list[int]:
    return [int(e["step"]) for e in model.history() if any(k.startswith("train/") for k in e)]


async def test_a_log_failing_after_the_commit_does_not_fail_the_step_and_is_written_at_the_next_step(
    tiny_model_path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    model = make_model(tmp_path, tiny_model_path)
    async with LocalBackend(progress=False, options=FAST) as backend:
        groups, result = await first_step_unrecorded(model, backend, monkeypatch)
        assert result.message is not None and "No space left on device" in result.message
        assert train_lines(model) == []  # nothing of step 1's record reached the disk
        # The disk has room again: the next step writes step 1's record first, then its own.
        assert (await model.train(await play_step(model, 1), config=LR)).step == 2
        assert train_lines(model) == [1, 2]
        assert len(read_groups_file(model.storage.trajectories_path("train", 1))) == len(groups)


async def test_a_step_left_unrecorded_before_later_logged_steps_is_recovered_at_restart(
    tiny_model_path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    model = make_model(tmp_path, tiny_model_path)
    async with LocalBackend(progress=False, options=FAST) as backend:
        groups, _ = await first_step_unrecorded(model, backend, monkeypatch)
        # As if what remembered it were gone (the old code raised, and the loop went on): step 2 logs fine.
        model._unlogged.clear()
        assert (await model.train(await play_step(model, 1), config=LR)).step == 2
        assert train_lines(model) == [2]
    async with LocalBackend(progress=False, options=FAST) as backend:
        restarted = make_model(tmp_path, tiny_model_path)
        await restarted.register(backend)
    assert sorted(train_lines(restarted)) == [1, 2]
    recovered = [e for e in restarted.history() if e["step"] == 1]
    assert recovered and recovered[0]["train/recovered"] == 1.0
    assert len(read_groups_file(restarted.storage.trajectories_path("train", 1))) == len(groups)


async def test_a_full_disk_fails_the_step_saying_what_the_disk_said_and_what_was_rolled_back(
    tiny_model_path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    model = make_model(tmp_path, tiny_model_path)
    async with LocalBackend(progress=False, options=FAST) as backend:
        await model.register(backend)
        groups = await play_step(model, 0)
        with monkeypatch.context() as patch:

            def save(*args: Any, **kwargs: Any) -> None:
                raise disk_full()

            patch.setattr(storage.ModelStorage, "commit_checkpoint", save)
            fail_record_writes(patch, model)  # logging the failed step's groups fails too
            with pytest.raises(StepError) as caught:
                await model.train(groups, config=LR)
        error = caught.value
        message = str(error)
        assert message.startswith(
            "step 1 failed while saving its checkpoint: the disk refused a write: No space left on device "
            "(ENOSPC). Rolled back: the trainer is back at checkpoint 0"
        ), message
        assert error.disk_error is not None and error.disk_error.errno == errno.ENOSPC
        assert error.restored_step == 0 and error.rejected_path is None
        assert any("could not be logged" in note for note in getattr(error, "__notes__", [])), error
        assert await model.get_step() == 0 and model.storage.checkpoint_steps() == [0]
        assert (await model.train(groups, config=LR)).step == 1  # the disk has room again


async def test_set_aside_checkpoints_are_bounded_listed_and_purged(
    tiny_model_path: Path, tmp_path: Path
) -> None:
    model = make_model(tmp_path, tiny_model_path)
    options = FAST.model_copy(update={"max_rejected_checkpoints": 2})
    async with LocalBackend(progress=False, options=options) as backend:
        await model.register(backend)
        service = backend.service(model)
        groups = await play_step(model, 0)

        def broken_load(step: int) -> None:
            raise RuntimeError(f"injected: adapter {step} does not load")

        service._load_into_engine = broken_load  # type: ignore[method-assign]
        for _ in range(3):  # each commits checkpoint 1, then fails: set aside
            with pytest.raises(StepError):
                await model.train(groups, config=LR)
        rejected = await backend.rejected_checkpoints(model)
        assert len(rejected) == 2 and len(model.storage.rejected_checkpoints()) == 2  # the newest two
        assert all(r.step == 1 and "injected: adapter 1 does not load" in (r.reason or "") for r in rejected)
        assert rejected[0].name < rejected[1].name
        assert await backend.purge_rejected_checkpoints(model) == [r.name for r in rejected]
        assert await backend.rejected_checkpoints(model) == [] and model.storage.rejected_checkpoints() == []
