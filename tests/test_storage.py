"""The on-disk record: names, history, lossless trajectories, checkpoints."""

from __future__ import annotations

import gzip
import json
import os
import warnings
from pathlib import Path
from typing import Any

import pytest
from helpers_choices import make_choice

import art
from art.record.storage import (
    CheckpointCorruptError,
    ModelStorage,
    group_fingerprint,
    read_groups_file,
    read_history_file,
    read_trajectories,
    validate_name,
)


@pytest.mark.parametrize("name", ["agent-001", "a.b_c", "X9"])
def test_good_names(name: str) -> None:
    assert validate_name(name, "model name") == name


@pytest.mark.parametrize("name", [".", "..", "a/b", "a b", "", "ü", "../x", "a\\b"])
def test_bad_names_are_refused_with_the_allowed_characters(name: str) -> None:
    with pytest.raises(ValueError, match="letters, digits"):
        validate_name(name, "project")


def test_model_refuses_bad_names() -> None:
    with pytest.raises(ValueError, match="letters, digits"):
        art.Model(name="../etc", project="p")
    with pytest.raises(ValueError, match="letters, digits"):
        art.TrainableModel(name="ok", project="a/b", base_model="x")


def test_history_appends_and_survives_a_torn_line(tmp_path: Path) -> None:
    storage = ModelStorage(tmp_path, "p", "m")
    storage.append_history(1, {"train/reward": 0.5})
    storage.append_history(1, {"val/reward": 0.7})
    with open(storage.history_path, "a") as f:
        f.write('{"step": 2, "train/rew')  # a crash mid-write
    with pytest.warns(UserWarning, match="line 3"):
        entries = storage.read_history()
    assert [(e["step"], e.get("train/reward"), e.get("val/reward")) for e in entries] == [
        (1, 0.5, None),
        (1, None, 0.7),
    ]


@pytest.mark.parametrize("compress", [False, True])
def test_groups_round_trip_losslessly_and_logging_twice_appends(tmp_path: Path, compress: bool) -> None:
    storage = ModelStorage(tmp_path, "p", "m")
    choice = make_choice(token_ids=[1, 2], logprobs=[-1.0, -2.0])
    traj = art.Trajectory(
        messages_and_choices=[{"role": "user", "content": "q"}, choice],
        tools=[{"type": "function", "function": {"name": "f"}}],
        reward=1.0,
        metrics={"m": 1.5},
        metadata={"k": "v"},
        logs=["hello"],
    )
    group = art.TrajectoryGroup([traj], exceptions=[ValueError("bad rollout")], metadata={"scenario": 3})
    path = storage.append_groups("train", 3, [group], compress=compress)
    storage.append_groups("train", 3, [group], compress=compress)
    assert path.name == ("0003.jsonl.gz" if compress else "0003.jsonl")
    groups = storage.read_groups("train", 3)
    assert len(groups) == 2
    assert groups[0] == group == groups[1]
    assert groups[0].exceptions[0].type == "ValueError"
    assert storage.logged_steps("train") == [3]
    assert read_trajectories(path) == [traj, traj]


def test_checkpoints_only_count_when_complete_and_leftovers_are_cleaned(tmp_path: Path) -> None:
    storage = ModelStorage(tmp_path, "p", "m")
    for step in (0, 1):
        tmp = storage.new_checkpoint_tmp_dir(step)
        (tmp / "adapter_model.safetensors").write_bytes(b"x")
        storage.commit_checkpoint(tmp, step, {"base_model": "b"})
    # a crash: one half-written step folder and one temp folder
    (storage.checkpoint_dir(2)).mkdir()
    (storage.checkpoint_dir(2) / "adapter_model.safetensors").write_bytes(b"partial")
    storage.new_checkpoint_tmp_dir(3)
    assert storage.checkpoint_steps() == [0, 1]
    assert storage.latest_checkpoint_step() == 1
    removed = storage.clean_incomplete_checkpoints()
    assert len(removed) == 2
    assert sorted(p.name for p in storage.checkpoints_dir.iterdir()) == ["0000", "0001", "rejected"]
    (set_aside,) = storage.rejected_checkpoints()  # the half-written folder is kept aside, not deleted
    assert (set_aside / "adapter_model.safetensors").read_bytes() == b"partial"
    reason = json.loads((set_aside / "rejection.json").read_text())["reason"]
    assert reason == "no art_checkpoint.json: not a PEFT adapter folder (no adapter_config.json)"
    manifest = json.loads((storage.checkpoint_dir(1) / "art_checkpoint.json").read_text())
    assert manifest["step"] == 1 and manifest["base_model"] == "b"
    with pytest.raises(FileExistsError):
        storage.commit_checkpoint(storage.new_checkpoint_tmp_dir(1), 1, {})


def test_a_name_too_long_for_the_filesystem_fails_when_the_model_is_made(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"model name is 300 characters long.*255.*NAME_MAX"):
        art.TrainableModel(name="a" * 300, project="p", base_model="x", base_path=str(tmp_path))
    with pytest.raises(ValueError, match=r"project is 256 characters long.*NAME_MAX"):
        art.Model(name="m", project="p" * 256, base_path=str(tmp_path))
    art.Model(name="a" * 255, project="p", base_path=str(tmp_path))  # the limit itself is fine


def test_a_path_too_long_for_the_filesystem_fails_when_the_model_is_made(tmp_path: Path) -> None:
    path_max = os.pathconf(tmp_path, "PC_PATH_MAX")
    deep = tmp_path / "/".join(["d" * 200] * (path_max // 201))  # a base_path near PATH_MAX
    with pytest.raises(ValueError, match=rf"path limit of {path_max} bytes \(PATH_MAX\)"):
        art.TrainableModel(name="agent", project="p", base_model="x", base_path=str(deep))


def _tear(path: Path, keep: int) -> None:
    """What a crash in the middle of the last write leaves: the file cut `keep` bytes before its end."""
    data = path.read_bytes()
    path.write_bytes(data[: len(data) - keep])


def test_a_torn_history_line_loses_nothing_after_it(tmp_path: Path) -> None:
    storage = ModelStorage(tmp_path, "p", "m")
    storage.append_history(1, {"train/reward": 0.5})
    storage.append_history(2, {"train/reward": 0.6})
    _tear(storage.history_path, 10)  # step 2's line loses its end
    storage.append_history(3, {"train/reward": 0.7})  # the next write starts on a line of its own
    storage.append_history(4, {"train/reward": 0.8})
    with pytest.warns(UserWarning, match=r"history.jsonl: line 2 is not a complete JSON object") as caught:
        entries = storage.read_history()
    assert [e["step"] for e in entries] == [1, 3, 4]
    assert len(caught) == 1
    with pytest.warns(UserWarning, match="line 2"):
        assert read_history_file(storage.history_path) == entries  # `art plot` reads it this way


def _group(reward: float) -> art.TrajectoryGroup:
    choice = make_choice(token_ids=[1, 2], logprobs=[-1.0, -2.0])
    return art.TrajectoryGroup(
        [art.Trajectory(messages_and_choices=[{"role": "user", "content": "q"}, choice], reward=reward)],
        metadata={"r": reward},
    )


@pytest.mark.parametrize("compress", [False, True])
def test_a_torn_trajectory_file_keeps_every_complete_group(tmp_path: Path, compress: bool) -> None:
    storage = ModelStorage(tmp_path, "p", "m")
    path = storage.append_groups("train", 1, [_group(0.0), _group(1.0)], compress=compress)
    before = path.stat().st_size
    storage.append_groups("train", 1, [_group(2.0)], compress=compress)
    _tear(path, (path.stat().st_size - before) // 2)  # the second write (group 2.0) is torn halfway
    with pytest.warns(UserWarning, match=rf"{path.name}: .*(line 3|incomplete gzip)"):
        assert [g.metadata["r"] for g in storage.read_groups("train", 1)] == [0.0, 1.0]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        storage.append_groups("train", 1, [_group(3.0)], compress=compress)  # after the crash
        groups = read_groups_file(path)
    assert [g.metadata["r"] for g in groups] == [0.0, 1.0, 3.0]
    assert any("line 3" in str(w.message) for w in caught), [str(w.message) for w in caught]
    if compress:
        with gzip.open(path, "rt") as f:  # the repaired file is plain gzip for any other reader too
            assert len(f.read().splitlines()) == 4  # 2 groups, the torn fragment, 1 group


def test_a_valid_line_that_is_not_a_group_names_the_file_and_line(tmp_path: Path) -> None:
    path = tmp_path / "0001.jsonl"
    path.write_text(json.dumps(_group(1.0).model_dump(mode="json")) + "\n" + '{"trajectories": 3}\n')
    with pytest.raises(ValueError, match=r"0001.jsonl: line 2 is not a valid trajectory group"):
        read_groups_file(path)


def test_a_group_has_the_same_fingerprint_after_a_round_trip_through_the_record(tmp_path: Path) -> None:
    storage = ModelStorage(tmp_path, "p", "m")
    group = _group(0.25)
    group.trajectories[0].metrics["nan"] = float("nan")
    storage.append_groups("train", 1, [group])
    (again,) = storage.read_groups("train", 1)
    assert group_fingerprint(again) == group_fingerprint(group)
    assert storage.group_fingerprints("train", 1) == {group_fingerprint(group)}
    assert group_fingerprint(_group(0.5)) != group_fingerprint(group)


def _commit(storage: ModelStorage, step: int) -> Path:
    tmp = storage.new_checkpoint_tmp_dir(step)
    (tmp / "adapter_model.safetensors").write_bytes(bytes(range(256)))
    storage.write_checkpoint_groups(tmp, [_group(1.0)])
    return storage.commit_checkpoint(tmp, step, {})


def test_a_checkpoint_changed_on_disk_fails_verification(tmp_path: Path) -> None:
    storage = ModelStorage(tmp_path, "p", "m")
    folder = _commit(storage, 1)
    storage.verify_checkpoint(1)
    assert read_groups_file(storage.checkpoint_groups_path(1))[0].metadata == {"r": 1.0}
    data = bytearray((folder / "adapter_model.safetensors").read_bytes())
    data[100] ^= 1
    (folder / "adapter_model.safetensors").write_bytes(bytes(data))
    with pytest.raises(
        CheckpointCorruptError, match=r"adapter_model\.safetensors changed since it was saved"
    ):
        storage.verify_checkpoint(1)
    (folder / "trained_groups.jsonl.gz").unlink()
    with pytest.raises(CheckpointCorruptError, match=r"trained_groups\.jsonl\.gz is missing"):
        storage.verify_checkpoint(1)


def test_a_rejected_checkpoint_is_kept_but_never_counted_or_cleaned(tmp_path: Path) -> None:
    storage = ModelStorage(tmp_path, "p", "m")
    _commit(storage, 0)
    _commit(storage, 1)
    where = storage.reject_checkpoint(1, "canary failed")
    assert where.parent == storage.checkpoints_dir / "rejected" and where.name.startswith("0001-")
    assert json.loads((where / "rejection.json").read_text())["reason"] == "canary failed"
    assert (where / "art_checkpoint.json").exists() and (where / "trained_groups.jsonl.gz").exists()
    assert storage.checkpoint_steps() == [0] and storage.latest_checkpoint_step() == 0
    assert storage.clean_incomplete_checkpoints() == []
    _commit(storage, 1)  # the step can be taken again
    assert storage.checkpoint_steps() == [0, 1]
    assert storage.rejected_checkpoints() == [where]


def _peft_folder(folder: Path, *, cut: int = 0) -> bytes:
    """A PEFT adapter folder as the reference ART saves it (no manifest); `cut` bytes missing at the end."""
    folder.mkdir(parents=True)
    (folder / "adapter_config.json").write_text(json.dumps({"peft_type": "LORA", "r": 8, "lora_alpha": 16}))
    header = json.dumps(
        {"a.lora_A.weight": {"dtype": "F32", "shape": [2, 2], "data_offsets": [0, 16]}}
    ).encode()
    data = len(header).to_bytes(8, "little") + header + bytes(range(16))
    (folder / "adapter_model.safetensors").write_bytes(data[: len(data) - cut])
    return data


def test_a_peft_adapter_without_our_manifest_is_adopted_not_deleted(tmp_path: Path) -> None:
    """A checkpoint saved by the reference ART (a PEFT folder, no art_checkpoint.json) becomes a checkpoint."""
    storage = ModelStorage(tmp_path, "p", "m")
    _commit(storage, 0)
    data = _peft_folder(storage.checkpoint_dir(5))
    assert storage.checkpoint_steps() == [0]
    assert storage.clean_incomplete_checkpoints() == []
    assert storage.checkpoint_steps() == [0, 5] and storage.adopted_checkpoints() == [5]
    assert (storage.checkpoint_dir(5) / "adapter_model.safetensors").read_bytes() == data
    storage.verify_checkpoint(5)  # its files are checked from now on
    (storage.checkpoint_dir(5) / "adapter_model.safetensors").write_bytes(data[:-1] + b"\xff")
    with pytest.raises(CheckpointCorruptError, match=r"adapter_model\.safetensors changed"):
        storage.verify_checkpoint(5)
    assert storage.clean_incomplete_checkpoints() == []  # adopted once; nothing else happens to it


@pytest.mark.parametrize(
    ("make", "reason"),
    [
        (
            lambda f: _peft_folder(f, cut=5),
            "adapter_model.safetensors has 98 bytes, its header describes 103 (cut short?)",
        ),
        (
            lambda f: (_peft_folder(f), (f / "trainer_state.json").write_text("{}")),
            "it holds ART's trainer_state.json, so it is an interrupted save or copy of an ART checkpoint",
        ),
        (
            lambda f: (_peft_folder(f), (f / "adapter_config.json").write_text("[1]")),
            "adapter_config.json is not a LoRA config",
        ),
    ],
)
def test_a_step_folder_without_manifest_that_is_not_a_whole_adapter_is_set_aside(
    tmp_path: Path, make: Any, reason: str
) -> None:
    storage = ModelStorage(tmp_path, "p", "m")
    make(storage.checkpoint_dir(3))
    (where,) = storage.clean_incomplete_checkpoints()
    assert where.parent == storage.rejected_dir and where.name.startswith("0003-")
    assert reason in json.loads((where / "rejection.json").read_text())["reason"]
    assert storage.checkpoint_steps() == [] and (where / "adapter_model.safetensors").exists()


def test_get_step_from_dir_counts_whole_checkpoints_only(tmp_path: Path) -> None:
    from art.utils.get_model_step import get_step_from_dir

    storage = ModelStorage(tmp_path, "proj", "agent")
    model_dir = str(storage.root)
    assert get_step_from_dir(model_dir) == 0 and not storage.root.exists()  # nothing created
    tmp = storage.new_checkpoint_tmp_dir(1)
    (tmp / "adapter_config.json").write_text("{}")
    storage.commit_checkpoint(tmp, 1, {})  # ours, with its manifest
    _peft_folder(storage.checkpoint_dir(2))  # the reference's: a whole PEFT adapter
    _peft_folder(storage.checkpoint_dir(3), cut=4)  # a copy cut short
    storage.checkpoint_dir(4).mkdir()  # an interrupted save
    assert get_step_from_dir(model_dir) == 2
