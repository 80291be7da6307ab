"""S3 backup and restore of a model's folder (`art.utils.s3`, `LocalBackend._experimental_*_s3`).

The AWS CLI is replaced by `tests/fake_aws.py` on PATH, which keeps "S3" in a folder and logs each call, so the
commands we build and the round trip are both checked; a real bucket needs the real CLI and credentials.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from helpers_choices import make_choice
from helpers_s3 import aws_calls, install_fake_aws

import art
from art.record.storage import ModelStorage
from art.utils import s3
from art.utils.get_model_step import get_model_step

# `_experimental_pull_from_s3` warns that it is deprecated, as the reference's does (checked in
# tests/backends/test_pull_model_checkpoint.py); here it is exercised for what it still does.
pytestmark = pytest.mark.filterwarnings("ignore:_experimental_pull_from_s3 is deprecated:DeprecationWarning")


@pytest.fixture
def bucket_root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    return install_fake_aws(tmp_path, monkeypatch)


def group(reward: float) -> art.TrajectoryGroup:
    return art.TrajectoryGroup(
        art.Trajectory(messages_and_choices=[{"role": "user", "content": "q"}, make_choice()], reward=r)
        for r in (reward, 1 - reward)
    )


async def trained_model(base: Path, fake_backend) -> art.TrainableModel:  # type: ignore[no-untyped-def]
    model = art.TrainableModel(name="agent", project="proj", base_model="tiny", base_path=str(base))
    await model.register(fake_backend)
    await model.train([group(1.0)])
    await model.train([group(0.0)])
    model.overwrite_state({"dataset_offset": 8})
    return model


def tree(folder: Path) -> dict[str, bytes]:
    return {
        p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()
    }


def test_s3_paths_follow_the_reference_layout(monkeypatch: pytest.MonkeyPatch) -> None:
    assert s3.build_s3_path(model_name="m", project="p", s3_bucket="b") == "s3://b/p/models/m"
    assert s3.build_s3_path(model_name="m", project="p", step=12, s3_bucket="b", prefix="/runs/") == (
        "s3://b/runs/p/models/m/checkpoints/0012"
    )
    monkeypatch.setenv("BACKUP_BUCKET", "from-env")
    assert s3.build_s3_path(model_name="m", project="p").startswith("s3://from-env/")
    monkeypatch.delenv("BACKUP_BUCKET")
    with pytest.raises(ValueError, match=r"pass s3_bucket=\.\.\. or set the BACKUP_BUCKET"):
        s3.build_s3_path(model_name="m", project="p")


async def test_push_then_pull_restores_the_model_and_training_resumes_from_it(
    tmp_path: Path, bucket_root: Path, fake_backend
) -> None:  # type: ignore[no-untyped-def]
    model = await trained_model(tmp_path / "machine-a", fake_backend)
    backend = art.LocalBackend()  # nothing starts until a model is registered with it
    await backend._experimental_push_to_s3(model, s3_bucket="backups", prefix="team")
    stored = bucket_root / "backups" / "team" / "proj" / "models" / "agent"
    assert tree(stored) == tree(model.storage.root)  # checkpoints, history, trajectories, state
    assert ["s3api", "create-bucket", "--bucket", "backups"] in aws_calls(
        bucket_root
    )  # made once, when missing

    # Another machine: only the newest checkpoint first, then everything.
    fresh = art.TrainableModel(name="agent", project="proj", base_model="tiny", base_path=str(tmp_path / "b"))
    await backend._experimental_pull_from_s3(fresh, s3_bucket="backups", prefix="team", only_step="latest")
    assert fresh.storage.checkpoint_steps() == [2] and get_model_step(fresh) == 2
    assert not fresh.storage.history_path.exists()
    await backend._experimental_pull_from_s3(
        fresh, s3_bucket="backups", prefix="team", exclude=["trajectories"]
    )
    assert fresh.storage.checkpoint_steps() == [0, 1, 2]
    assert fresh.history() == model.history() and fresh.read_state() == {"dataset_offset": 8}
    assert not (fresh.storage.root / "trajectories").exists()
    assert aws_calls(bucket_root)[-1][:4] == ["s3", "sync", "--exclude", "trajectories/*"]
    await fresh.register(type(fake_backend)())
    assert await fresh.get_step() == 2  # training goes on from the backed-up step


async def test_push_with_delete_removes_checkpoints_deleted_locally(
    tmp_path: Path, bucket_root: Path, fake_backend, monkeypatch: pytest.MonkeyPatch
) -> None:  # type: ignore[no-untyped-def]
    model = await trained_model(tmp_path, fake_backend)
    monkeypatch.setenv("BACKUP_BUCKET", "env-bucket")  # the reference's default bucket
    backend = art.LocalBackend()
    await backend._experimental_push_to_s3(model)
    shutil.rmtree(model.storage.checkpoint_dir(1))
    await backend._experimental_push_to_s3(model, delete=True)
    steps = bucket_root / "env-bucket" / "proj" / "models" / "agent" / "checkpoints"
    assert sorted(p.name for p in steps.iterdir()) == ["0000", "0002"]


async def test_pull_with_nothing_in_s3_and_failures_say_what_happened(
    tmp_path: Path, bucket_root: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    model = art.TrainableModel(name="agent", project="proj", base_model="tiny", base_path=str(tmp_path))
    backend = art.LocalBackend()
    await backend._experimental_pull_from_s3(model, s3_bucket="empty", only_step="latest", verbose=True)
    assert "No checkpoints found in S3" in capsys.readouterr().out
    with pytest.raises(FileNotFoundError, match="no model folder to push"):
        await backend._experimental_push_to_s3(model, s3_bucket="empty")
    monkeypatch.setenv("FAKE_S3_FORBID", "1")
    with pytest.raises(
        s3.ForbiddenBucketCreationError, match=r"could not create the S3 bucket 'taken'.*AccessDenied"
    ):
        await s3.ensure_bucket_exists("taken")
    monkeypatch.setenv("PATH", str(tmp_path / "nowhere"))
    with pytest.raises(s3.S3SyncError, match="pip install awscli"):
        await s3.s3_sync(str(tmp_path), "s3://b/x")


async def test_pulling_a_model_this_backend_serves_is_refused(tmp_path: Path, bucket_root: Path) -> None:
    model = art.TrainableModel(name="agent", project="proj", base_model="tiny", base_path=str(tmp_path))
    backend = art.LocalBackend()
    backend._served[backend._key(model)] = object()  # type: ignore[assignment]  # as after register()
    with pytest.raises(RuntimeError, match=r"pull from S3 before `await model\.register"):
        await backend._experimental_pull_from_s3(model, s3_bucket="b")
    assert not bucket_root.exists()  # refused before any command ran


def test_the_reference_import_path_of_the_latest_step_helper_works() -> None:
    from art.utils.s3_checkpoint_utils import get_latest_checkpoint_step_from_s3

    assert get_latest_checkpoint_step_from_s3 is s3.get_latest_checkpoint_step_from_s3


async def test_a_checkpoint_is_zipped_uploaded_and_presigned(tmp_path: Path, bucket_root: Path) -> None:
    import zipfile

    storage = ModelStorage(tmp_path / "art", "demo", "agent")
    folder = storage.new_checkpoint_tmp_dir(3)
    (folder / "adapter_config.json").write_text('{"r": 8}')
    (folder / "adapter_model.safetensors").write_bytes(b"weights")
    storage.commit_checkpoint(folder, 3, {})

    url = await s3.archive_and_presign_step_url(
        "agent", "demo", 3, s3_bucket="deploy", prefix="runs", art_path=str(tmp_path / "art")
    )
    key = "deploy/runs/demo/models/agent/zipped-steps/0003.zip"
    assert url == f"https://fake-s3.invalid/{key}?X-Amz-Expires=3600"
    assert (
        s3.build_s3_zipped_step_path(
            model_name="agent", project="demo", step=3, s3_bucket="deploy", prefix="runs"
        )
        == f"s3://{key}"
    )
    with zipfile.ZipFile(bucket_root / key) as archive:
        assert archive.read("adapter_model.safetensors") == b"weights"
        assert {"adapter_config.json", "art_checkpoint.json"} <= set(archive.namelist())
    with pytest.raises(ValueError, match=r"checkpoint folder .*0004 does not exist"):
        await s3.archive_and_presign_step_url(
            "agent", "demo", 4, s3_bucket="deploy", art_path=str(tmp_path / "art")
        )
