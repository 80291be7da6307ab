"""The `art` command as a user meets it, run as a subprocess: help, one-line errors, flags as flags."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest


def art(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "COLUMNS": "100"}
    if env.get("PYTHONPATH"):  # absolute, since some commands run in another folder
        env["PYTHONPATH"] = os.pathsep.join(
            str(Path(p).resolve()) for p in env["PYTHONPATH"].split(os.pathsep)
        )
    env.pop("ART_DEBUG", None)
    return subprocess.run(
        [sys.executable, "-m", "art", *args], capture_output=True, text=True, timeout=120, cwd=cwd, env=env
    )


def test_art_alone_shows_the_help_and_exits_0() -> None:
    done = art()
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == "Usage: art [OPTIONS] COMMAND [ARGS]..."
    assert "ART, the Agent Reinforcement Trainer" in done.stdout
    assert "demo" in done.stdout and "plot" in done.stdout


def test_demo_help_wraps_whole_sentences_and_shows_flags_as_flags() -> None:
    done = art("demo", "--help")
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert "<bool>" not in out and "╭" not in out  # plain layout: no type tags, no boxes
    quick = next(line for line in out.splitlines() if line.split()[:1] == ["--quick"])  # its own line
    assert quick.split()[:2] == ["--quick", "A"]  # the flag, then its help: no metavar
    steps = next(line for line in out.splitlines() if line.strip().startswith("--steps"))
    assert "<int>" in steps  # a value option names its type; a flag does not
    # The description's first sentence is rewrapped as a paragraph, not cut where the source broke it.
    description = " ".join(out.split("\n\n")[1].split())
    assert description.startswith("Train the default model (SmolLM2-135M) to play tic-tac-toe against a")


def test_an_unknown_option_is_one_line_that_points_to_the_help() -> None:
    done = art("demo", "--stepz", "3")
    assert done.returncode == 2
    assert done.stdout == ""
    (line,) = done.stderr.splitlines()
    # click's suggestion of the closest option, in the shape of every error: command, flag, problem; fix
    assert line == "art demo: --stepz: no such option (did you mean --steps?); see `art demo --help`"


def test_a_missing_model_folder_says_which_models_exist(tmp_path: Path) -> None:
    folder = tmp_path / ".art" / "demo" / "models" / "tic-tac-toe"
    folder.mkdir(parents=True)
    (folder / "history.jsonl").write_text('{"step": 0, "val/win": 0.1}\n')
    done = art("plot", "nowhere", cwd=tmp_path)
    assert done.returncode == 2
    assert done.stderr.splitlines() == [
        "art plot: MODEL_DIR: no history.jsonl in nowhere; pass a model's folder "
        "(models with a history here: .art/demo/models/tic-tac-toe)"
    ]


def test_an_unknown_metric_lists_the_logged_ones(tmp_path: Path) -> None:
    (tmp_path / "history.jsonl").write_text(
        json.dumps({"step": 1, "train/reward": 0.1, "recorded_at": "x"})
        + "\n"
        + json.dumps({"step": 2, "val/win": 0.3})
        + "\n"
    )
    done = art("plot", str(tmp_path), "--metric", "nope/metric")
    assert done.returncode == 2, done.stderr
    assert done.stderr.splitlines() == [
        f"art plot: --metric: {tmp_path / 'history.jsonl'}: no metric 'nope/metric' in this history; "
        "logged metrics: train/reward, val/win"
    ]
    assert "Traceback" not in done.stderr


def test_plot_draws_reward_and_win_rate_with_labelled_axes(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    history = [{"step": s, "train/reward": 0.1 * s, "val/reward": 0.2, "val/win": 0.1 * s} for s in range(4)]
    (tmp_path / "history.jsonl").write_text("".join(json.dumps(e) + "\n" for e in history))
    done = art("plot", str(tmp_path))
    assert done.returncode == 0, done.stderr
    png = Path(done.stdout.strip())
    assert png == tmp_path / "plots" / "history.png" and png.read_bytes()[:4] == b"\x89PNG"


def test_the_plot_figure_names_its_axes_and_series(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("matplotlib")
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from art.record.plots import plot_history

    figures: list[object] = []
    monkeypatch.setattr(plt, "close", lambda fig=None: figures.append(fig))
    history = [{"step": s, "train/reward": 0.1 * s, "val/reward": 0.2, "val/win": 0.1 * s} for s in range(4)]
    plot_history(history, tmp_path / "h.png", title="demo")
    (fig,) = figures
    reward, win = fig.axes  # type: ignore[attr-defined]  # one panel per metric, over one step axis
    assert win.get_xlabel() == "step" and reward.get_ylabel() == "reward"
    assert win.get_ylabel() == "win rate"
    assert [line.get_label() for line in reward.get_lines()] == ["training rollouts", "held-out"]
    assert [line.get_label() for line in win.get_lines()] == ["held-out"]
    assert [t.get_text() for t in reward.get_legend().get_texts()] == ["training rollouts", "held-out"]
    assert reward.get_title() == "demo"
    assert list(win.get_lines()[0].get_xdata()) == [0, 1, 2, 3]


def test_help_of_public_classes_shows_our_docstrings_first() -> None:
    import pydoc

    from pydantic import BaseModel

    import art

    text = pydoc.render_doc(art.TrainableModel, renderer=pydoc.plaintext)
    # No entry of pydantic's own API (549 lines of it before): every help entry is one of ours. The total
    # grows with our public methods (each documented with an example; 45 added the reference's
    # merge_state/history/...), so it is bounded per public entry: pydantic's API alone was 549 lines.
    pydantic_api = [n for n in dir(BaseModel) if not n.startswith("_")]
    shown = [n for n in pydantic_api if f"\n |  {n}(" in text or f"\n |  {n}\n" in text]
    assert shown == [], shown
    entries = [n for n in dir(art.TrainableModel) if not n.startswith("_") and n not in pydantic_api]
    assert len(text.splitlines()) < 10 * len(entries), (len(text.splitlines()), len(entries))
    assert "__pydantic" not in text and "model_validate_json" not in text
    head = "\n".join(text.splitlines()[:12])
    assert "A base model (Hugging Face id" in head
    assert "async train(self" in text and "async log(self" in text
    model = art.TrainableModel(name="m", project="p", base_model="x")
    assert "model_dump" in dir(model) and model.model_dump()["name"] == "m"  # pydantic untouched
