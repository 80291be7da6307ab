"""`LocalBackend._experimental_pull_model_checkpoint`: a checkpoint found on disk or pulled from S3.

No model is loaded: checkpoints are committed straight into a model's folder (each with a file naming
where it came from, so a test sees which copy it got), and S3 is `tests/fake_aws.py`, a folder.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest
from helpers_s3 import aws_calls, install_fake_aws

import art
from art.record.storage import CheckpointCorruptError, ModelStorage
from art.utils import s3


@pytest.fixture
def bucket_root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    return install_fake_aws(tmp_path, monkeypatch)


def trainable(base: Path) -> art.TrainableModel:
    return art.TrainableModel(name="agent", project="proj", base_model="tiny", base_path=str(base))


def commit(base: Path, step: int, origin: str) -> None:
    storage = ModelStorage(base, "proj", "agent")
    tmp = storage.new_checkpoint_tmp_dir(step)
    (tmp / "adapter_model.safetensors").write_text(f"{origin} step {step}")
    (tmp / "adapter_config.json").write_text('{"r": 8}')
    storage.commit_checkpoint(tmp, step, {"base_model": "tiny"})


async def backed_up(tmp_path: Path, steps: list[int]) -> None:
    """Checkpoints `steps` pushed to s3://backups by another machine, whose disk is then gone."""
    other = tmp_path / "other-machine"
    for step in steps:
        commit(other, step, "s3")
    await s3.push_model_to_s3("agent", "proj", s3_bucket="backups", art_path=str(other))
    shutil.rmtree(other)


async def steps_0_to_3_in_s3_and_0_1_on_disk(tmp_path: Path) -> tuple[art.TrainableModel, art.LocalBackend]:
    """Steps 0-3 backed up in s3://backups, steps 0 and 1 on this disk too; the model and a backend."""
    await backed_up(tmp_path, [0, 1, 2, 3])
    model = trainable(tmp_path / "here")
    for step in (0, 1):
        commit(tmp_path / "here", step, "local")
    return model, art.LocalBackend()


def weights(folder: str | Path) -> str:
    return (Path(folder) / "adapter_model.safetensors").read_text()


def pulls(root: Path) -> list[list[str]]:
    """The `aws s3 sync` commands run so far that copied from S3 to disk."""
    if not (root / "calls.jsonl").exists():
        return []
    return [c for c in aws_calls(root) if c[:2] == ["s3", "sync"] and c[-2].startswith("s3://")]


async def test_latest_and_an_explicit_step_come_from_disk_as_they_are(tmp_path: Path) -> None:
    model = trainable(tmp_path)
    for step in (0, 1, 2):
        commit(tmp_path, step, "local")
    backend = art.LocalBackend()
    for asked in (None, "latest"):
        folder = await backend._experimental_pull_model_checkpoint(model, step=asked)
        assert folder == str(tmp_path / "proj" / "models" / "agent" / "checkpoints" / "0002")
        assert weights(folder) == "local step 2"
    folder = await backend._experimental_pull_model_checkpoint(model, step=1)
    assert folder == str(model.storage.checkpoint_dir(1)) and weights(folder) == "local step 1"
    assert model.storage.checkpoint_steps() == [0, 1, 2]  # nothing moved or added


async def test_backend_path_is_where_checkpoints_are_looked_for(tmp_path: Path) -> None:
    commit(tmp_path / "store", 4, "local")
    model = trainable(tmp_path / "elsewhere")
    folder = await art.LocalBackend(path=str(tmp_path / "store"))._experimental_pull_model_checkpoint(model)
    assert folder == str(tmp_path / "store" / "proj" / "models" / "agent" / "checkpoints" / "0004")


async def test_local_path_gets_a_whole_copy_and_a_busy_folder_is_refused(tmp_path: Path) -> None:
    model = trainable(tmp_path)
    for step in (0, 1, 2):
        commit(tmp_path, step, "local")
    backend = art.LocalBackend()
    out = tmp_path / "export" / "ckpt"
    folder = await backend._experimental_pull_model_checkpoint(model, step=1, local_path=str(out))
    assert folder == str(out) and weights(out) == "local step 1"
    assert sorted(p.name for p in out.iterdir()) == sorted(
        p.name for p in model.storage.checkpoint_dir(1).iterdir()
    )
    assert [p.name for p in out.parent.iterdir()] == ["ckpt"]  # no temporary folder left beside it
    assert ModelStorage(tmp_path, "proj", "agent").checkpoint_steps() == [0, 1, 2]  # the original stays
    # Asked again: the folder already holds that checkpoint, so it is returned as it is.
    assert await backend._experimental_pull_model_checkpoint(model, step=1, local_path=str(out)) == str(out)
    # Another step into the same folder, or any non-empty folder: refused, naming it; nothing is touched.
    with pytest.raises(
        FileExistsError, match=rf"local_path {re.escape(str(out))} is not empty.*checkpoint 2"
    ):
        await backend._experimental_pull_model_checkpoint(model, step=2, local_path=str(out))
    assert weights(out) == "local step 1"
    busy = tmp_path / "busy"
    busy.mkdir()
    (busy / "notes.txt").write_text("mine")
    with pytest.raises(FileExistsError, match=rf"local_path {re.escape(str(busy))} is not empty"):
        await backend._experimental_pull_model_checkpoint(model, local_path=str(busy))
    assert [p.name for p in busy.iterdir()] == ["notes.txt"]
    empty = tmp_path / "empty"
    empty.mkdir()
    assert weights(await backend._experimental_pull_model_checkpoint(model, local_path=str(empty))) == (
        "local step 2"
    )


async def test_a_step_only_in_s3_is_pulled_where_the_backend_keeps_it(
    tmp_path: Path, bucket_root: Path
) -> None:
    await backed_up(tmp_path, [0, 1, 2, 3])
    here = tmp_path / "here"
    model = trainable(here)
    commit(here, 0, "local")
    backend = art.LocalBackend()
    folder = await backend._experimental_pull_model_checkpoint(model, step=2, s3_bucket="backups")
    assert folder == str(model.storage.checkpoint_dir(2)) and weights(folder) == "s3 step 2"
    assert model.storage.checkpoint_steps() == [0, 2]
    model.storage.verify_checkpoint(2)
    assert sorted(p.name for p in model.storage.checkpoints_dir.iterdir()) == ["0000", "0002"]  # no temp
    (pull,) = pulls(bucket_root)
    assert pull[-2] == "s3://backups/proj/models/agent/checkpoints/0002"  # only that step came down
    # A step on disk is used without asking S3 at all.
    calls = len(aws_calls(bucket_root))
    assert weights(await backend._experimental_pull_model_checkpoint(model, step=0, s3_bucket="backups")) == (
        "local step 0"
    )
    assert len(aws_calls(bucket_root)) == calls


async def test_latest_is_the_newest_of_disk_and_s3_and_disk_wins_a_tie(
    tmp_path: Path, bucket_root: Path
) -> None:
    model, backend = await steps_0_to_3_in_s3_and_0_1_on_disk(tmp_path)
    folder = await backend._experimental_pull_model_checkpoint(model, s3_bucket="backups", verbose=True)
    assert folder == str(model.storage.checkpoint_dir(3)) and weights(folder) == "s3 step 3"
    assert model.storage.checkpoint_steps() == [0, 1, 3]
    # Now step 3 is on disk too (here with other weights): the local copy wins, nothing is pulled.
    shutil.rmtree(model.storage.checkpoint_dir(3))
    commit(tmp_path / "here", 3, "local")
    before = len(pulls(bucket_root))
    folder = await backend._experimental_pull_model_checkpoint(model, step="latest", s3_bucket="backups")
    assert weights(folder) == "local step 3" and len(pulls(bucket_root)) == before
    # Newer on disk than in S3: the local one.
    commit(tmp_path / "here", 5, "local")
    assert weights(await backend._experimental_pull_model_checkpoint(model, s3_bucket="backups")) == (
        "local step 5"
    )


async def test_a_pull_into_local_path_leaves_the_backend_folder_alone(
    tmp_path: Path, bucket_root: Path
) -> None:
    await backed_up(tmp_path, [0, 3])
    model = trainable(tmp_path / "here")
    backend = art.LocalBackend()
    backend._served[backend._key(model)] = object()  # type: ignore[assignment]  # as after register()
    out = tmp_path / "export"
    folder = await backend._experimental_pull_model_checkpoint(
        model, local_path=str(out), s3_bucket="backups"
    )
    assert folder == str(out) and weights(out) == "s3 step 3"
    assert (out / "art_checkpoint.json").is_file()
    assert model.storage.checkpoint_steps() == []
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".tmp-")] == []
    # Into the backend's own folder while it serves the model: refused before anything is pulled.
    before = len(pulls(bucket_root))
    with pytest.raises(
        RuntimeError, match=r"pull a checkpoint into its folder before `await model\.register"
    ):
        await backend._experimental_pull_model_checkpoint(model, step=0, s3_bucket="backups")
    assert len(pulls(bucket_root)) == before and not model.storage.checkpoints_dir.exists()


async def test_a_step_that_exists_nowhere_is_named_with_the_steps_that_do(
    tmp_path: Path, bucket_root: Path
) -> None:
    model, backend = await steps_0_to_3_in_s3_and_0_1_on_disk(tmp_path)
    folder = re.escape(str(model.storage.checkpoints_dir))
    with pytest.raises(
        FileNotFoundError,
        match=rf"checkpoint 7 of proj/agent is not in {folder} \(steps there: \[0, 1\]\); pass s3_bucket=",
    ):
        await backend._experimental_pull_model_checkpoint(model, step=7)
    with pytest.raises(
        FileNotFoundError,
        match=(
            rf"checkpoint 7 of proj/agent is neither in {folder} \(steps there: \[0, 1\]\) nor in "
            r"s3://backups/proj/models/agent/checkpoints/ \(steps there: \[0, 1, 2, 3\]\)"
        ),
    ):
        await backend._experimental_pull_model_checkpoint(model, step=7, s3_bucket="backups")
    assert model.storage.checkpoint_steps() == [0, 1] and pulls(bucket_root) == []
    empty = trainable(tmp_path / "empty")
    with pytest.raises(ValueError, match=r"no checkpoint of proj/agent in .* nor in s3://nothing/"):
        await backend._experimental_pull_model_checkpoint(empty, s3_bucket="nothing")
    with pytest.raises(ValueError, match=r"no checkpoint of proj/agent in .*pass s3_bucket=\.\.\. to look"):
        await backend._experimental_pull_model_checkpoint(empty)
    with pytest.raises(ValueError, match=r"step must be a checkpoint number .* not -1"):
        await backend._experimental_pull_model_checkpoint(model, step=-1)
    with pytest.raises(ValueError, match=r"not 'newest'"):
        await backend._experimental_pull_model_checkpoint(model, step="newest")  # type: ignore[arg-type]


async def test_an_incomplete_or_altered_checkpoint_in_s3_is_not_kept(
    tmp_path: Path, bucket_root: Path
) -> None:
    await backed_up(tmp_path, [1, 2])
    stored = bucket_root / "backups" / "proj" / "models" / "agent" / "checkpoints"
    (stored / "0001" / "art_checkpoint.json").unlink()  # e.g. a push cut short
    (stored / "0002" / "adapter_model.safetensors").write_text("s3 step 9")  # same size, other bytes
    model = trainable(tmp_path / "here")
    backend = art.LocalBackend()
    with pytest.raises(
        FileNotFoundError, match=r"checkpoint 1 of proj/agent in s3://.* has no art_checkpoint"
    ):
        await backend._experimental_pull_model_checkpoint(model, step=1, s3_bucket="backups")
    with pytest.raises(
        CheckpointCorruptError, match=r"adapter_model\.safetensors changed since it was saved"
    ):
        await backend._experimental_pull_model_checkpoint(model, step=2, s3_bucket="backups")
    assert not any(model.storage.checkpoints_dir.iterdir())  # no step folder, no temporary one


async def test_pull_from_s3_is_deprecated_in_favour_of_pull_model_checkpoint(
    tmp_path: Path, bucket_root: Path
) -> None:
    await backed_up(tmp_path, [0, 1])
    model = trainable(tmp_path / "here")
    with pytest.warns(DeprecationWarning, match="use _experimental_pull_model_checkpoint") as caught:
        await art.LocalBackend()._experimental_pull_from_s3(model, s3_bucket="backups", only_step="latest")
    assert caught[0].filename == __file__  # attributed to the caller's line
    assert model.storage.checkpoint_steps() == [1]  # and it still works


async def test_a_bare_peft_adapter_the_reference_pushed_is_adopted_when_pulled(
    tmp_path: Path, bucket_root: Path
) -> None:
    """The reference ART pushes its checkpoints without our manifest: a whole adapter is taken, with one."""
    stored = bucket_root / "backups" / "proj" / "models" / "agent" / "checkpoints" / "0003"
    stored.mkdir(parents=True)
    (stored / "adapter_config.json").write_text('{"peft_type": "LORA", "r": 8}')
    header = b'{"w": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}}'
    data = len(header).to_bytes(8, "little") + header + b"\x00\x00\x80?"
    (stored / "adapter_model.safetensors").write_bytes(data)
    model = trainable(tmp_path / "here")
    folder = await art.LocalBackend()._experimental_pull_model_checkpoint(model, s3_bucket="backups")
    assert Path(folder) == model.storage.checkpoint_dir(3)
    assert (Path(folder) / "adapter_model.safetensors").read_bytes() == data
    assert model.storage.checkpoint_steps() == [3] and model.storage.adopted_checkpoints() == [3]
    model.storage.verify_checkpoint(3)
