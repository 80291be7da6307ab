"""Records for the `art ui` / `art show` tests: hand-written with the storage API (fast), and one made by a
real short training run (tiny model, LocalBackend; session-scoped: about a minute on 2 cores)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import art
from art.record.step_record import StepTrainerRecord, TrainedGroup, TrainedTrajectory, TrainedTurn
from art.record.storage import ModelStorage, group_fingerprint


def choice(text: str, logprobs: list[float]) -> dict[str, Any]:
    """A serialised Choice as the engine returns it: one logprob entry per sampled token (one per char)."""
    return {
        "index": 0,
        "finish_reason": "stop",
        "message": {"role": "assistant", "content": text},
        "logprobs": {
            "content": [
                {"token": c, "logprob": lp, "bytes": None, "top_logprobs": []}
                for c, lp in zip(text, logprobs, strict=True)
            ]
        },
    }


def group(scenario: int, rewards: list[float]) -> art.TrajectoryGroup:
    trajectories = []
    for i, reward in enumerate(rewards):
        t = art.Trajectory(
            messages_and_choices=[
                {"role": "user", "content": f"scenario {scenario}"},
                {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [
                        {
                            "id": "c1",
                            "type": "function",
                            "function": {"name": "look", "arguments": '{"q": 1}'},
                        }
                    ],
                },
                {"role": "tool", "tool_call_id": "c1", "content": "found it"},
                choice(f"ans{i}", [-0.5, -0.25, -0.125, -1.0 - i]),
            ],
            reward=reward,
            metadata={"scenario_id": scenario},
        )
        t.log(f"RULER explanation: trajectory {i} of scenario {scenario} was judged")
        trajectories.append(t)
    return art.TrajectoryGroup(trajectories)


def trainer_record(groups: list[art.TrajectoryGroup], step: int) -> StepTrainerRecord:
    """What a trainer would record for `groups` (advantages = reward - 0.5; ratios 1.5 on the last token)."""
    return StepTrainerRecord(
        step=step,
        updated=True,
        groups=[
            TrainedGroup(
                index=gi,
                fingerprint=group_fingerprint(g),
                trajectories=[
                    TrainedTrajectory(
                        advantage=t.reward - 0.5,
                        status="trained",
                        trained_tokens=4,
                        turns=[TrainedTurn(item=3, trained=[False, True, True, True], trainer_logprob=[None, -0.2, -0.1, -0.5], ratio=[None, 1.05, 1.02, 1.5])],
                    )
                    for t in g.trajectories
                ],
            )
            for gi, g in enumerate(groups)
        ],
    )  # fmt: skip


def write_record(base: Path, steps: int = 3, *, trainer: bool = True) -> ModelStorage:
    """A model `proj/agent` with `steps` train steps (2 groups of 3) and val at 0 and `steps`."""
    storage = ModelStorage(base, "proj", "agent")
    storage.write_model_json({"name": "agent", "project": "proj", "base_model": "tiny", "trainable": True})
    for step in range(1, steps + 1):
        groups = [group(0, [0.0, 0.5, 1.0]), group(1, [0.2, 0.2 * step, 0.9])]
        storage.append_groups("train", step, groups)
        if trainer:
            storage.append_trainer_record("train", step, trainer_record(groups, step))
        storage.append_history(
            step, {"train/reward": 0.1 * step, "train/loss": 1.0 / step, "time/step_wall_s": 2.0}
        )
    for step in (0, steps):
        storage.append_groups("val", step, [group(0, [0.1 * step, 0.2]), group(1, [0.3, 0.4])])
        storage.append_history(step, {"val/reward": 0.2 + 0.1 * step})
    return storage


@pytest.fixture
def record(tmp_path: Path) -> ModelStorage:
    return write_record(tmp_path / ".art")


@pytest.fixture(scope="session")
def trained_record(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The model folder of a record made by a real short training run (see tests/helpers_ui.py)."""
    pytest.importorskip("torch", reason="needs the `local` extra: pip install -e '.[local]'")
    from helpers_ui import make_record

    from art.testing.tiny_model import make_tiny_model

    base = tmp_path_factory.mktemp("ui-trained")
    return make_record(make_tiny_model(base / "tiny", embedding_std=0.1), base / ".art")
