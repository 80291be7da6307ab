"""The README's example file runs as written (on a tiny model) and is exactly what the README shows."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
from helpers_scripts import load_script

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "examples" / "quickstart.py"


def test_the_readme_shows_the_example_file_verbatim() -> None:
    readme = (REPO / "README.md").read_text()
    assert "```python\n" + EXAMPLE.read_text() + "```" in readme


def test_the_example_trains_two_steps_through_the_real_server_and_trainer(
    tiny_model_path: Path, tmp_path: Path
) -> None:
    pytest.importorskip("torch")
    quickstart = load_script("examples/quickstart.py")
    rewards = asyncio.run(quickstart.main(str(tiny_model_path), steps=2, base_path=str(tmp_path)))
    assert len(rewards) == 2 and all(0.0 <= r <= 1.0 for r in rewards)
    root = tmp_path / "quickstart" / "models" / "adder"
    history = [json.loads(line) for line in (root / "history.jsonl").read_text().splitlines()]
    trained = [e for e in history if "train/reward" in e]
    assert len(trained) == 2  # one record per step, whatever a random tiny model's rewards allowed to train
    assert [e["train/reward"] for e in trained] == pytest.approx(rewards)
    assert len(list((root / "trajectories" / "train").iterdir())) >= 1
