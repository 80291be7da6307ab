"""The on-disk record: names, history, lossless trajectories, checkpoints."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers_choices import make_choice

import art
from art.storage import ModelStorage, read_trajectories, validate_name


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
    assert sorted(p.name for p in storage.checkpoints_dir.iterdir()) == ["0000", "0001"]
    manifest = json.loads((storage.checkpoint_dir(1) / "art_checkpoint.json").read_text())
    assert manifest["step"] == 1 and manifest["base_model"] == "b"
    with pytest.raises(FileExistsError):
        storage.commit_checkpoint(storage.new_checkpoint_tmp_dir(1), 1, {})
