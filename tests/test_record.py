"""The record is completed from committed checkpoints: a step trained and committed but never logged (the
process stopped in between) gets its trajectories and history line when the model registers again."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers_choices import make_choice

import art
from art.record.recovery import recover_unlogged_steps
from art.record.storage import ModelStorage


def _groups(*rewards: float) -> list[art.TrajectoryGroup]:
    return [
        art.TrajectoryGroup(
            art.Trajectory(messages_and_choices=[{"role": "user", "content": "q"}, make_choice()], reward=r)
            for r in (reward, 1.0 - reward)
        )
        for reward in rewards
    ]


def _commit_step(storage: ModelStorage, step: int, groups: list[art.TrajectoryGroup]) -> None:
    """What the service does before a step is committed: the groups and the metrics go into its checkpoint."""
    tmp = storage.new_checkpoint_tmp_dir(step)
    (tmp / "adapter_config.json").write_text("{}")
    storage.write_checkpoint_groups(tmp, groups)
    storage.commit_checkpoint(tmp, step, {"kind": "rl", "metrics": {"loss": 0.25, "grad_norm": 2.0}})


def _model(tmp_path: Path) -> art.TrainableModel:
    return art.TrainableModel(name="m", project="p", base_model="tiny", base_path=str(tmp_path))


async def test_a_step_committed_but_never_logged_is_recorded_at_the_next_register(
    tmp_path: Path, fake_backend, caplog: pytest.LogCaptureFixture
) -> None:  # type: ignore[no-untyped-def]
    model = _model(tmp_path)
    await model.register(fake_backend)  # checkpoint 0
    step1 = _groups(0.0, 0.2)
    _commit_step(model.storage, 1, step1)
    await model.log(step1, metrics={"loss": 0.25}, step=1, split="train")  # step 1: logged as usual
    step2 = _groups(0.4)
    _commit_step(model.storage, 2, step2)  # step 2: the process died before model.log

    again = _model(tmp_path)
    await again.register(type(fake_backend)())
    assert "step 2 of m was trained and committed" in caplog.text
    history = again.history()
    assert [e["step"] for e in history] == [1, 2]
    assert history[1]["train/recovered"] == 1.0
    assert history[1]["loss/train"] == 0.25 and history[1]["loss/grad_norm"] == 2.0  # the reference's names
    assert history[1]["train/reward"] == 0.5 and history[1]["data/step_num_trajectories"] == 2
    assert again.storage.read_groups("train", 2) == step2
    assert again.storage.read_groups("train", 1) == step1  # nothing added to a logged step
    # idempotent: registering again, or logging the same groups again, adds nothing
    assert recover_unlogged_steps(again.storage) == []
    await again.log(step2, split="train", step=2)
    assert again.storage.read_groups("train", 2) == step2


async def test_a_crash_between_the_trajectories_and_the_history_line_completes_only_the_line(
    tmp_path: Path, fake_backend
) -> None:  # type: ignore[no-untyped-def]
    model = _model(tmp_path)
    await model.register(fake_backend)
    groups = _groups(0.0, 0.3)
    _commit_step(model.storage, 1, groups)
    model.storage.append_groups("train", 1, groups[:1])  # model.log wrote one group, then the crash
    assert recover_unlogged_steps(model.storage) == [1]
    assert model.storage.read_groups("train", 1) == groups  # the missing one added, none twice
    assert [e["step"] for e in model.history()] == [1]
