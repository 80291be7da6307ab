"""examples/pipeline_yes_no_maybe.py: its reward and prompts, and two pipeline steps on a tiny model."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from types import ModuleType

import pytest
from helpers_scripts import load_script


def load() -> ModuleType:
    return load_script("examples/pipeline_yes_no_maybe.py")


def test_the_reward_reads_the_first_word_and_the_prompts_cover_every_order() -> None:
    example = load()
    assert [example.reward(t) for t in ("Maybe.", " no, sorry", "'yes'", "perhaps", "", "maybe?")] == [
        1.0, 0.75, 0.5, 0.0, 0.0, 1.0,
    ]  # fmt: skip
    prompts = example.prompts()
    assert len(prompts) == len(set(prompts)) == 2 * 2 * (6 + 6)
    assert "respond with 'yes', 'no' or 'maybe'" in prompts and "just answer with maybe or no" in prompts


def test_two_pipeline_steps_with_evaluations_on_a_tiny_model(
    tiny_model_path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("torch")
    example = load()
    # a random tiny model never says yes/no/maybe: reward the length's parity so groups can train
    monkeypatch.setattr(example, "reward", lambda text: float(len(text) % 2))
    val = asyncio.run(
        example.main(
            str(tiny_model_path), steps=2, rollouts_per_scenario=3, base_path=str(tmp_path), eval_every=1
        )
    )
    assert sorted(val) == [0, 1, 2] and all(0.0 <= r <= 1.0 for r in val.values())
    root = tmp_path / "pipeline" / "models" / "yes-no-maybe"
    history = [json.loads(line) for line in (root / "history.jsonl").read_text().splitlines()]
    assert [e["step"] for e in history if "train/reward" in e] == [1, 2]
    logged = [
        json.loads(line) for line in (root / "trajectories" / "train" / "0002.jsonl").read_text().splitlines()
    ]
    assert logged and all(t["initial_policy_version"] in (0, 1) for g in logged for t in g["trajectories"])
