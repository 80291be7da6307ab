"""`LocalBackend._experimental_fork_checkpoint`: a new model starts from another model's checkpoint."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from helpers_choices import make_choice
from helpers_s3 import install_fake_aws

import art
from art.utils.get_model_step import get_model_step


def group(reward: float) -> art.TrajectoryGroup:
    return art.TrajectoryGroup(
        art.Trajectory(messages_and_choices=[{"role": "user", "content": "q"}, make_choice()], reward=r)
        for r in (reward, 1 - reward)
    )


def trainable(base: Path, name: str, base_model: str = "tiny") -> art.TrainableModel:
    return art.TrainableModel(name=name, project="proj", base_model=base_model, base_path=str(base))


async def source_at_step_3(base: Path, fake_backend) -> art.TrainableModel:  # type: ignore[no-untyped-def]
    source = trainable(base, "teacher")
    await source.register(fake_backend)
    for reward in (1.0, 0.0, 1.0):
        await source.train([group(reward)])
    return source


async def test_fork_copies_the_chosen_checkpoint_and_training_resumes_there(
    tmp_path: Path, fake_backend
) -> None:  # type: ignore[no-untyped-def]
    source = await source_at_step_3(tmp_path, fake_backend)
    student = trainable(tmp_path, "student")
    backend = art.LocalBackend()
    await backend._experimental_fork_checkpoint(student, from_model="teacher", not_after_step=2)
    assert student.storage.checkpoint_steps() == [2] and get_model_step(student) == 2
    manifest = student.storage.read_checkpoint_manifest(2)
    assert manifest["model"] == "student"
    assert manifest["forked_from"] == {"project": "proj", "model": "teacher", "step": 2}
    student.storage.verify_checkpoint(2)  # the copy is whole
    assert (source.storage.checkpoint_dir(2) / "adapter_config.json").read_bytes() == (
        student.storage.checkpoint_dir(2) / "adapter_config.json"
    ).read_bytes()

    other = type(fake_backend)()
    await student.register(other)
    assert await student.get_step() == 2
    assert student.history() == []  # the teacher's training is not the student's record
    await student.train([group(1.0)])
    assert await student.get_step() == 3 and [e["step"] for e in student.history()] == [3]


async def test_fork_takes_the_newest_checkpoint_and_refuses_what_cannot_work(
    tmp_path: Path, fake_backend
) -> None:  # type: ignore[no-untyped-def]
    await source_at_step_3(tmp_path, fake_backend)
    backend = art.LocalBackend()
    student = trainable(tmp_path, "student")
    await backend._experimental_fork_checkpoint(student, from_model="teacher")
    assert student.storage.checkpoint_steps() == [3]
    with pytest.raises(FileExistsError, match=r"already has checkpoint\(s\) \[3\].*new model name"):
        await backend._experimental_fork_checkpoint(student, from_model="teacher", not_after_step=2)
    with pytest.raises(ValueError, match=r"trained on base model 'tiny'.*uses 'other'"):
        await backend._experimental_fork_checkpoint(trainable(tmp_path, "x", "other"), from_model="teacher")
    with pytest.raises(ValueError, match="no checkpoint of proj/nobody"):
        await backend._experimental_fork_checkpoint(trainable(tmp_path, "y"), from_model="nobody")
    with pytest.raises(ValueError, match=r"at or before step -1; it has \[0, 1, 2, 3\]"):
        await backend._experimental_fork_checkpoint(
            trainable(tmp_path, "z"), from_model="teacher", not_after_step=-1
        )
    assert not (tmp_path / "proj" / "models" / "z" / "checkpoints").exists() or not any(
        (tmp_path / "proj" / "models" / "z" / "checkpoints").iterdir()
    )


async def test_a_corrupted_source_checkpoint_is_not_forked(tmp_path: Path, fake_backend) -> None:  # type: ignore[no-untyped-def]
    source = await source_at_step_3(tmp_path, fake_backend)
    (source.storage.checkpoint_dir(3) / "adapter_config.json").write_text('{"r": 999}')
    student = trainable(tmp_path, "student")
    with pytest.raises(Exception, match="corrupted"):
        await art.LocalBackend()._experimental_fork_checkpoint(student, from_model="teacher")
    assert student.storage.checkpoint_steps() == []


async def test_fork_from_s3_pulls_only_the_checkpoint_it_needs(
    tmp_path: Path, fake_backend, monkeypatch: pytest.MonkeyPatch
) -> None:  # type: ignore[no-untyped-def]
    bucket = install_fake_aws(tmp_path, monkeypatch)
    machine_a, machine_b = tmp_path / "a", tmp_path / "b"
    source = await source_at_step_3(machine_a, fake_backend)
    await art.LocalBackend()._experimental_push_to_s3(source, s3_bucket="backups")
    shutil.rmtree(machine_a)
    student = trainable(machine_b, "student")
    await art.LocalBackend()._experimental_fork_checkpoint(
        student, from_model="teacher", from_s3_bucket="backups", not_after_step=2
    )
    assert student.storage.checkpoint_steps() == [2]
    pulled = machine_b / "proj" / "models" / "teacher"
    assert [p.name for p in (pulled / "checkpoints").iterdir()] == ["0002"]  # one checkpoint came down
    assert not (pulled / "history.jsonl").exists()
    assert json.loads((bucket / "calls.jsonl").read_text().splitlines()[-1])[:2] == ["s3", "sync"]
    with pytest.raises(
        ValueError, match="no checkpoint of proj/teacher at or before step -1 in s3://backups"
    ):
        await art.LocalBackend()._experimental_fork_checkpoint(
            trainable(machine_b, "late"), from_model="teacher", from_s3_bucket="backups", not_after_step=-1
        )
