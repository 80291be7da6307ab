"""The reference's temporal-clue example, rewritten as close to the original as a rewrite allows.

Original: OpenPipe/ART `examples/temporal_clue/temporal-clue.py`. Same calls in the same order with the
same arguments: puzzles read from a JSON file and split into val/test/train, `TrainableModel(...,
_internal_config={"init_args": {"gpu_memory_utilization": 0.775}})` (no effect here: a warning says so),
`with LocalBackend() as backend:` (the synchronous form, inside a coroutine), validation and training
rollouts gathered concurrently, `model.log(val_groups)`, `model.delete_checkpoints()` (by the logged
`val/reward`), `backend.train(model, train_groups, learning_rate=5e-5)`, `model.log(..., split="train")`.
The S3 backup runs as in the original (`_experimental_pull_from_s3` before `register`, `_experimental_push_to_s3`
each step, with `BACKUP_BUCKET` set), against a stand-in `aws` CLI that keeps "S3" in a folder.
Changed: the base model (a tiny local one), the puzzles (stand-ins of the same shape: the original file
is not available here), and fewer puzzles, rollouts and steps.
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import re
from pathlib import Path
from typing import Any, TypedDict

import pytest
from compat_helpers import choice_steps
from compat_model import temporal_clue_puzzles
from helpers_s3 import aws_calls, install_fake_aws

import art
from art.local import LocalBackend

VAL_END, TEST_END = 4, 8  # the original: 64, 128
STRIDE = 3  # the original: 4
VAL_ROLLOUTS, TRAIN_ROLLOUTS = 2, 6  # the original: 2, 50
STEPS = 3  # the original: 1_000


class TemporalCluePuzzle(TypedDict):
    num_clues: int
    prompt: str
    solution: dict[str, str]


def load_puzzles(puzzles_path: str) -> tuple[list[TemporalCluePuzzle], list[TemporalCluePuzzle]]:
    """The original's module-level loading and split (here a function: the file is made at test time)."""
    puzzles: list[TemporalCluePuzzle] = json.loads(open(puzzles_path).read())  # noqa: SIM115 - as the original
    val_puzzles = puzzles[:VAL_END]
    _test_puzzles = puzzles[VAL_END:TEST_END]
    train_puzzles = puzzles[TEST_END:]
    random.seed(42)
    random.shuffle(train_puzzles)
    return val_puzzles, train_puzzles


async def rollout(model: art.Model, puzzle: TemporalCluePuzzle) -> art.Trajectory:
    messages: art.Messages = [{"role": "user", "content": puzzle["prompt"]}]
    client = model.openai_client()
    chat_completion = await client.chat.completions.create(
        messages=messages,  # type: ignore[arg-type]
        model=model.get_inference_name(),
    )
    choice = chat_completion.choices[0]
    content = choice.message.content
    assert isinstance(content, str)
    num_correct = 0
    for key, value in puzzle["solution"].items():
        if matches := re.findall(rf"{key}\. ([A-Za-z \.:-]+)", content):
            match = matches[-1]
            if match.strip().lower() == value.lower():
                num_correct += 1
    reward = acc = num_correct / len(puzzle["solution"])
    return art.Trajectory(messages_and_choices=[*messages, choice], reward=reward, metrics={"acc": acc})


async def main(
    base_model: str,
    val_puzzles: list[TemporalCluePuzzle],
    train_puzzles: list[TemporalCluePuzzle],
    seen: list[dict[str, Any]],
) -> art.TrainableModel:
    model = art.TrainableModel(
        name="001",
        project="temporal-clue",
        base_model=base_model,
        _internal_config={"init_args": {"gpu_memory_utilization": 0.775}},
    )
    with LocalBackend() as backend:
        if "BACKUP_BUCKET" in os.environ:
            await backend._experimental_pull_from_s3(
                model,
                s3_bucket=os.environ["BACKUP_BUCKET"],
                verbose=True,
            )
        else:
            print("BACKUP_BUCKET not found in environment variables")
        await model.register(backend)

        stride = STRIDE
        for i in range(await model.get_step(), STEPS):
            served = model.get_inference_name()  # (test probe) the name this step's rollouts use
            val_groups, train_groups = await asyncio.gather(
                art.gather_trajectory_groups(
                    (
                        art.TrajectoryGroup(rollout(model, puzzle) for _ in range(VAL_ROLLOUTS))
                        for puzzle in val_puzzles
                    ),
                    pbar_desc="val",
                ),
                art.gather_trajectory_groups(
                    (
                        art.TrajectoryGroup(rollout(model, puzzle) for _ in range(TRAIN_ROLLOUTS))
                        for puzzle in train_puzzles[i * stride : (i + 1) * stride]
                    ),
                    pbar_desc="train",
                ),
            )
            await model.log(val_groups)
            await model.delete_checkpoints()
            if "BACKUP_BUCKET" in os.environ:
                await backend._experimental_push_to_s3(
                    model,
                    s3_bucket=os.environ["BACKUP_BUCKET"],
                    verbose=True,
                )
            result = await backend.train(model, train_groups, learning_rate=5e-5)
            await model.log(train_groups, metrics=result.metrics, step=result.step, split="train")
            seen.append({"name": served, "val": val_groups, "train": train_groups, "result": result})
    return model


async def test_the_reference_temporal_clue_loop_runs_and_trains(
    compat_model_path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)  # LocalBackend() keeps its record in ./.art, as in the reference
    bucket = install_fake_aws(tmp_path, monkeypatch)
    monkeypatch.setenv("BACKUP_BUCKET", "clue-backups")
    puzzles_path = tmp_path / "puzzles.json"
    puzzles_path.write_text(json.dumps(temporal_clue_puzzles(TEST_END + STRIDE * STEPS, seed=7)))
    val_puzzles, train_puzzles = load_puzzles(str(puzzles_path))
    seen: list[dict[str, Any]] = []
    with pytest.warns(UserWarning, match=r"_internal_config\.init_args\.gpu_memory_utilization .*no effect"):
        model = await main(str(compat_model_path), val_puzzles, train_puzzles, seen)

    assert len(seen) == STEPS
    for step, s in enumerate(seen):
        assert s["name"] == f"001@{step}"
        assert set(choice_steps(s["val"] + s["train"])) == {step}
        assert len(s["val"]) == VAL_END and len(s["train"]) == STRIDE
        assert s["result"].step == step + 1
    history = model.history()
    val_steps = [e["step"] for e in history if "val/reward" in e]
    assert val_steps == [0, 1, 2]
    assert [e["step"] for e in history if "train/reward" in e] == [1, 2, 3]
    # delete_checkpoints() before each step kept the latest and the best by val/reward
    val_rewards = {e["step"]: e["val/reward"] for e in history if "val/reward" in e}
    best = max(val_rewards, key=lambda st: (val_rewards[st], st))
    assert set(model.storage.checkpoint_steps()) == {best, STEPS - 1, STEPS}
    # the sync `with` closed the backend: its servers are gone
    assert model.inference_base_url is not None
    with pytest.raises(Exception):  # noqa: B017 - any connection error
        await model.openai_client().models.list()
    # The backup before the last step's training holds what the model had then: checkpoints and record.
    backup = bucket / "clue-backups" / "temporal-clue" / "models" / "001"
    assert sorted(p.name for p in (backup / "checkpoints").iterdir() if p.is_dir())[-1] == f"{STEPS - 1:04d}"
    backed_up = [json.loads(line) for line in (backup / "history.jsonl").read_text().splitlines()]
    assert [e["step"] for e in backed_up if "val/reward" in e] == val_steps  # the last val came before it
    assert aws_calls(bucket)[-1][:3] == ["s3", "sync", ".art/temporal-clue/models/001"]
