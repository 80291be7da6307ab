"""examples/pipeline_binary_prefix_tool.py: its reward, and two pipeline steps of forced tool calls on a tiny
model."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from types import ModuleType

import pytest
from helpers_scripts import load_script


def load() -> ModuleType:
    return load_script("examples/pipeline_binary_prefix_tool.py")


def test_the_reward_is_the_shared_prefix_of_a_binary_guess() -> None:
    example = load()
    secret = example.SECRET_BITS
    assert example.score(secret) == len(secret) == 30
    assert example.score("1100") == 4 and example.score("0") == 0 and example.score(secret[:7] + "x") == 0
    assert example.score(None) == example.score("") == 0
    assert example.score(secret[:12] + ("0" if secret[12] == "1" else "1") + "1" * 20) == 12


def test_two_pipeline_steps_of_forced_tool_calls_on_a_tiny_model(
    tiny_model_path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("torch")
    example = load()
    # a random tiny model rarely writes a binary string: reward a parity of its characters so groups can train
    monkeypatch.setattr(example, "score", lambda guess: float(sum(map(ord, guess or "")) % 2))
    val = asyncio.run(
        example.main(
            str(tiny_model_path),
            steps=2,
            rollouts_per_scenario=3,
            base_path=str(tmp_path),
            eval_every=1,
            max_tokens=160,
        )
    )
    assert sorted(val) == [0, 1, 2]
    root = tmp_path / "pipeline" / "models" / "binary-prefix-tool"
    logged = [
        json.loads(line) for line in (root / "trajectories" / "train" / "0001.jsonl").read_text().splitlines()
    ]
    trajectories = [t for g in logged for t in g["trajectories"]]
    assert trajectories and all(
        t["metrics"]["tool_call_found"] == 1.0 for t in trajectories
    )  # forced: always a call
    calls = [t["messages_and_choices"][-1]["message"]["tool_calls"] for t in trajectories]
    assert all(len(c) == 1 and c[0]["function"]["name"] == "make_guess" for c in calls)
    guesses = [json.loads(c[0]["function"]["arguments"])["guess"] for c in calls]
    assert all(len(g) <= 30 for g in guesses) and len(set(guesses)) > 1  # complete calls, sampled guesses
    history = [json.loads(line) for line in (root / "history.jsonl").read_text().splitlines()]
    train_rows = [e for e in history if "train/reward" in e]
    assert [e["step"] for e in train_rows] == [1, 2]
    assert all(e["data/step_num_groups_submitted"] >= 2 for e in train_rows)  # the automatic data metrics
