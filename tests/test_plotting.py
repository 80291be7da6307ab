"""`art plot` / `plot_history`: whole-number steps, one panel per metric, one line per split, every row a
point. Checked by reading the figure's own data back, and by the PNG it writes."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("matplotlib")

from art.record.plots import plot_history, series


@pytest.fixture
def figures(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """The figures `plot_history` draws (kept open instead of closed, to read them back)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    kept: list[Any] = []
    monkeypatch.setattr(plt, "close", lambda fig=None: kept.append(fig))
    return kept


def lines_of(ax: Any) -> dict[str, tuple[list[float], list[float]]]:
    return {line.get_label(): (list(line.get_xdata()), list(line.get_ydata())) for line in ax.get_lines()}


def visible_xticks(ax: Any) -> list[float]:
    low, high = ax.get_xlim()
    return [t for t in ax.get_xticks() if low <= t <= high]


def test_two_steps_show_two_whole_steps_on_a_zero_to_one_scale(tmp_path: Path, figures: list[Any]) -> None:
    history = [{"step": 1, "train/reward": 0.0}, {"step": 2, "train/reward": 0.0}]
    plot_history(history, tmp_path / "h.png")
    (ax,) = figures[0].axes
    assert lines_of(ax) == {"training rollouts": ([1, 2], [0.0, 0.0])}
    assert visible_xticks(ax) == [1.0, 2.0]  # not 0.96, 0.98, ... around one point
    assert ax.get_ylim() == pytest.approx((-0.04, 1.04))  # a 0-1 reward, not +-0.04 around 0


def test_one_panel_per_metric_one_line_per_split(tmp_path: Path, figures: list[Any]) -> None:
    history = [
        {"step": s, "train/reward": 0.1 * s, "train/loss": 2.3 - 0.1 * s, "val/reward": 0.2 + 0.1 * s}
        for s in range(1, 4)
    ] + [{"step": 3, "val/win": 0.5, "val/base_reward": 0.25}]
    metrics = ["train/reward", "val/reward", "val/base_reward", "train/loss", "val/win"]
    plot_history(history, tmp_path / "h.png", metrics, title="run")
    reward, loss, win = figures[0].axes
    assert [ax.get_ylabel() for ax in (reward, loss, win)] == ["reward", "loss", "win rate"]
    assert lines_of(reward) == {
        "training rollouts": ([1, 2, 3], pytest.approx([0.1, 0.2, 0.3])),
        "held-out": ([1, 2, 3], pytest.approx([0.3, 0.4, 0.5])),
        "held-out, base model": ([3], [0.25]),
    }
    assert lines_of(loss) == {"training rollouts": ([1, 2, 3], pytest.approx([2.2, 2.1, 2.0]))}
    assert loss.get_ylim()[1] < 2.5 and reward.get_ylim() == pytest.approx((-0.04, 1.04))  # own scales
    assert win.yaxis.get_major_formatter().__class__.__name__ == "PercentFormatter"
    # a split keeps its colour in every panel
    assert reward.get_lines()[0].get_color() == loss.get_lines()[0].get_color()
    assert reward.get_title() == "run" and win.get_xlabel() == "step"
    assert all(float(t).is_integer() for t in visible_xticks(win))


def test_rows_of_the_same_step_are_all_drawn(tmp_path: Path, figures: list[Any]) -> None:
    # A RULER row logged at step 1 after the train row of step 1: both points stay.
    history = [
        {"step": 1, "train/reward": 0.2},
        {"step": 1, "train/reward": 0.6, "train/ruler_s": 3.0},
        {"step": 2, "train/reward": 0.4},
    ]
    assert series(history, "train/reward") == ([1, 1, 2], [0.2, 0.6, 0.4])
    plot_history(history, tmp_path / "h.png")
    (ax,) = figures[0].axes
    assert lines_of(ax)["training rollouts"] == ([1, 1, 2], [0.2, 0.6, 0.4])


def test_art_plot_writes_the_png(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from art.cli import app

    history = [{"step": s, "train/reward": 0.1 * s, "val/win": 0.05 * s} for s in (1, 2)]
    (tmp_path / "history.jsonl").write_text("".join(json.dumps(e) + "\n" for e in history))
    done = CliRunner().invoke(app, ["plot", str(tmp_path)])
    assert done.exit_code == 0, done.output
    png = tmp_path / "plots" / "history.png"
    assert done.output.strip() == str(png) and png.read_bytes()[:4] == b"\x89PNG"
