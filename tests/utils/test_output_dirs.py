"""`art.utils.output_dirs` and `get_repo_root_path` name the folders a trained model really has on disk."""

from __future__ import annotations

import os
from pathlib import Path

import art
from art.utils.get_repo_root_path import get_repo_root_path
from art.utils.output_dirs import (
    get_model_dir,
    get_models_dir,
    get_output_dir_from_model_properties,
    get_step_checkpoint_dir,
    get_trajectories_split_dir,
)


async def test_the_named_folders_are_where_a_trained_model_keeps_its_record(
    tmp_path: Path, fake_backend
) -> None:  # type: ignore[no-untyped-def]
    model = art.TrainableModel(name="agent", project="proj", base_model="tiny", base_path=str(tmp_path))
    await model.register(fake_backend)
    await model.train([art.TrajectoryGroup(art.Trajectory(reward=r) for r in (0.0, 1.0))])

    model_dir = get_model_dir(model)
    assert Path(model_dir) == model.storage.root
    assert model_dir == get_output_dir_from_model_properties("proj", "agent", str(tmp_path))
    assert os.listdir(get_models_dir("proj", art_path=str(tmp_path))) == ["agent"]
    assert Path(get_step_checkpoint_dir(model_dir, 1)).is_dir()
    assert sorted(os.listdir(get_trajectories_split_dir(model_dir, "train"))) == [
        "0001.jsonl",
        "0001.parquet",
    ]


def test_repo_root_is_the_checkout_holding_art() -> None:
    root = Path(get_repo_root_path()).resolve()
    assert (root / ".git").exists() and (root / "src" / "art" / "__init__.py").exists()
