"""`pull_model_trajectories`: a model's trajectories and history come back from its S3 backup, without its
checkpoints, ready for `load_trajectories` (S3 played by tests/fake_aws.py)."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers_choices import make_choice
from helpers_s3 import install_fake_aws

import art
from art.utils import s3
from art.utils.benchmarking.pull_model_trajectories import pull_model_trajectories


def group(reward: float) -> art.TrajectoryGroup:
    return art.TrajectoryGroup(
        [
            art.Trajectory(
                messages_and_choices=[{"role": "user", "content": "q"}, make_choice()], reward=reward
            )
        ]
    )


async def test_trajectories_and_history_come_back_without_checkpoints(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fake_backend, capsys: pytest.CaptureFixture[str]
) -> None:  # type: ignore[no-untyped-def]
    install_fake_aws(tmp_path, monkeypatch)
    trained = art.TrainableModel(
        name="agent", project="proj", base_model="tiny", base_path=str(tmp_path / "a")
    )
    await trained.register(fake_backend)
    await trained.train([group(1.0)])
    await trained.log([group(0.5)], split="val", step=1)
    await s3.push_model_to_s3("agent", "proj", s3_bucket="backups", art_path=str(tmp_path / "a"))

    monkeypatch.setenv("BACKUP_BUCKET", "backups")
    fresh = art.Model(name="agent", project="proj", base_path=str(tmp_path / "b"))
    await pull_model_trajectories(fresh)
    assert fresh.storage.read_groups("val", 1)[0].trajectories[0].reward == 0.5
    assert fresh.history() == trained.history()
    assert fresh.storage.checkpoint_steps() == [] and not fresh.storage.checkpoints_dir.exists()
    out = capsys.readouterr().out
    assert "Pulling trajectories for model 'agent' from S3 bucket 'backups'" in out
    assert "Finished pulling trajectories." in out


async def test_without_backup_bucket_it_says_which_variable_to_set(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("BACKUP_BUCKET", raising=False)
    with pytest.raises(OSError, match="BACKUP_BUCKET is required"):
        await pull_model_trajectories(art.Model(name="agent", project="proj", base_path=str(tmp_path)))
