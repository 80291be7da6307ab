"""`log_constant_metrics_wandb`: a baseline's scores reach an offline W&B run at every step 0..num_steps."""

from __future__ import annotations

from pathlib import Path

import pytest
from wandb_reader import read_offline_run

import art
from art.utils.benchmarking.log_constant_metrics_wandb import log_constant_metrics_wandb

pytest.importorskip("wandb", reason="needs the `wandb` extra: pip install -e '.[wandb]'")


async def test_constant_metrics_are_logged_at_every_step_under_their_split(offline: Path) -> None:
    import wandb

    baseline = art.Model(name="gpt-4o", project="tic-tac-toe")
    await log_constant_metrics_wandb(
        baseline, num_steps=3, split_metrics={"val": {"win": 0.62, "reward": 0.4}, "train": {"win": 0.5}}
    )
    wandb.teardown()  # wait until wandb's service has closed the run file
    (run_dir,) = offline.glob("offline-run-*")
    run = read_offline_run(run_dir)
    assert (run.project, run.display_name) == ("tic-tac-toe", "gpt-4o")
    assert [row["_step"] for row in run.history] == [0, 1, 2, 3]
    for row in run.history:
        assert (row["val/win"], row["val/reward"], row["train/win"]) == (0.62, 0.4, 0.5)


async def test_the_run_can_have_another_name(offline: Path) -> None:
    import wandb

    await log_constant_metrics_wandb(
        art.Model(name="o3", project="demo"), 0, {"val": {"win": 1.0}}, logged_run_name="o3 (prompted)"
    )
    wandb.teardown()
    (run_dir,) = offline.glob("offline-run-*")
    run = read_offline_run(run_dir)
    assert run.display_name == "o3 (prompted)" and [r["val/win"] for r in run.history] == [1.0]
