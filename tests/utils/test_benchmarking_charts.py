"""`art.utils.benchmarking.charts`: the lines and bars drawn are the per-step means of what was logged.

Each chart is read back from the returned matplotlib Figure (its lines' data, its bars' rectangles and
labels), so what is checked is what a user sees."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers_choices import make_choice

import art

pl = pytest.importorskip("polars", reason="needs the `benchmarking` extra")
matplotlib = pytest.importorskip("matplotlib", reason="needs the `benchmarking` extra")
matplotlib.use("Agg")  # no window, whatever the machine has

import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.colors import to_hex  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402

from art.utils.benchmarking.charts import (  # noqa: E402
    percentage_comparison_bar_chart,
    training_progress_chart,
)
from art.utils.benchmarking.load_trajectories import load_trajectories  # noqa: E402
from art.utils.benchmarking.types import BenchmarkModelKey  # noqa: E402

PROJECT = "tic-tac-toe"
# rewards logged per (model, split, step); the charts must draw their means
LOGGED = {
    ("agent-001", "val", 0): [0.0, 0.5],
    ("agent-001", "val", 1): [0.5, 1.0],
    ("agent-001", "val", 2): [1.0, 1.0],
    ("agent-001", "train", 1): [0.0, 0.0],
    ("agent-001", "train", 2): [0.5, 0.0],
    ("gpt-4o", "val", 0): [0.5, 0.7],
    ("o3", "val", 0): [0.6],
}


@pytest.fixture(autouse=True)
def _close_figures() -> Iterator[None]:
    yield
    plt.close("all")


@pytest.fixture
async def df(tmp_path: Path) -> pl.DataFrame:
    for (name, split, step), rewards in LOGGED.items():
        model = art.Model(name=name, project=PROJECT, base_path=str(tmp_path))
        group = art.TrajectoryGroup(
            art.Trajectory(
                messages_and_choices=[{"role": "user", "content": "move?"}, make_choice("b2")],
                reward=r,
                metrics={"win": r == 1.0, "moves": 4 + r * 2},
            )
            for r in rewards
        )
        await model.log([group], split=split, step=step)
    return await load_trajectories(PROJECT, art_path=str(tmp_path))


def lines_by_label(fig: Figure) -> dict[str, matplotlib.lines.Line2D]:
    return {line.get_label(): line for line in fig.axes[0].get_lines()}


def legend_labels(fig: Figure) -> list[str]:
    legend = fig.axes[0].get_legend()
    assert legend is not None
    return [text.get_text() for text in legend.get_texts()]


def test_progress_lines_are_the_mean_per_step_and_baselines_span_the_steps(df: pl.DataFrame) -> None:
    models: list[str | BenchmarkModelKey] = ["gpt-4o", BenchmarkModelKey("agent-001", "Trained"), "o3"]
    fig = training_progress_chart(df, "reward", models=models, title="Win rate", y_label="reward")
    assert isinstance(fig, Figure)
    lines = lines_by_label(fig)
    trained = lines["Trained"]
    assert list(trained.get_xdata()) == [0, 1, 2]
    assert list(trained.get_ydata()) == pytest.approx([0.25, 0.75, 1.0])  # val only, not train
    assert trained.get_marker() == "o"
    gpt, o3 = lines["gpt-4o"], lines["o3"]
    assert (list(gpt.get_xdata()), list(gpt.get_ydata())) == ([0, 2], pytest.approx([0.6, 0.6]))
    assert gpt.get_linestyle() == "--"
    assert list(o3.get_ydata()) == pytest.approx([0.6, 0.6])
    # the same score as another baseline: dotted, so both stay visible
    assert o3.get_linestyle() == ":"
    assert legend_labels(fig) == ["Trained", "gpt-4o", "o3"]  # trained models first
    assert len({to_hex(line.get_color()) for line in lines.values()}) == 3
    ax = fig.axes[0]
    assert (ax.get_title(), ax.get_xlabel(), ax.get_ylabel()) == ("Win rate", "Step", "reward")


def test_progress_uses_each_keys_split_and_metric_columns(df: pl.DataFrame) -> None:
    keys: list[str | BenchmarkModelKey] = [
        BenchmarkModelKey("agent-001", "Agent (train)", "train"),
        BenchmarkModelKey("agent-001", "Agent (val)"),
    ]
    fig = training_progress_chart(df, "win", models=keys, x_label="")
    lines = lines_by_label(fig)
    assert list(lines["Agent (train)"].get_xdata()) == [1, 2]
    assert list(lines["Agent (train)"].get_ydata()) == [0.0, 0.0]
    assert list(lines["Agent (val)"].get_ydata()) == pytest.approx([0.0, 0.5, 1.0])
    assert fig.axes[0].get_title() == "win" and fig.axes[0].get_xlabel() == ""


def test_progress_without_models_draws_every_model_trained_ones_first(df: pl.DataFrame) -> None:
    fig = training_progress_chart(df.filter(pl.col("split") == "val"), "moves", perfect_score=6.0)
    assert legend_labels(fig) == ["agent-001", "gpt-4o", "o3"]
    lines = lines_by_label(fig)
    assert list(lines["agent-001"].get_ydata()) == pytest.approx([4.5, 5.5, 6.0])
    (reference,) = [line for line in fig.axes[0].get_lines() if line.get_label() == "_nolegend_"]
    assert list(reference.get_ydata()) == [6.0, 6.0] and list(reference.get_xdata()) == [0, 2]
    assert "Perfect score" in [t.get_text() for t in fig.axes[0].texts]


def test_progress_errors_and_a_model_without_rows(df: pl.DataFrame) -> None:
    with pytest.raises(ValueError, match=r"Column 'metric_nope' not found in DataFrame\. Available"):
        training_progress_chart(df, "nope")
    with pytest.raises(ValueError, match="No rows left"):
        training_progress_chart(df, "reward", models=[BenchmarkModelKey("gpt-4o", split="test")])
    with pytest.warns(UserWarning, match="no rows for model 'typo'"):
        fig = training_progress_chart(df, "reward", models=["agent-001", "typo"])
    assert legend_labels(fig) == ["agent-001"]


def test_bars_stack_the_first_step_and_the_gain_in_percent(df: pl.DataFrame) -> None:
    fig = percentage_comparison_bar_chart(
        df, "reward", models=["gpt-4o", BenchmarkModelKey("agent-001", "Trained")], perfect_score=1.0
    )
    ax = fig.axes[0]
    baseline, first, gain = ax.patches
    assert (baseline.get_x() + baseline.get_width() / 2, baseline.get_height()) == (0, pytest.approx(60.0))
    assert to_hex(baseline.get_facecolor()) == "#e0dcd5" and not baseline.get_hatch()
    assert (first.get_height(), first.get_y()) == (pytest.approx(25.0), 0)  # step 0's mean, x100
    assert (gain.get_height(), gain.get_y()) == (pytest.approx(75.0), pytest.approx(25.0))  # to step 2's
    assert gain.get_hatch() == "///" and to_hex(first.get_facecolor()) == "#e67a30"
    assert [t.get_text() for t in ax.get_xticklabels()] == ["gpt-4o", "Trained"]
    texts = [t.get_text() for t in ax.texts]
    assert {"60%", "RL +75%", "100%", "Perfect score"} <= set(texts)
    (line,) = ax.get_lines()
    assert list(line.get_ydata()) == [100.0, 100.0]
    assert ax.get_title() == "reward" and list(ax.get_yticks()) == []


def test_bars_keep_units_above_one_and_show_a_decline(df: pl.DataFrame) -> None:
    declining = df.with_columns(
        pl.when(pl.col("step") == 2).then(pl.col("metric_moves") - 3).otherwise(pl.col("metric_moves"))
    )
    fig = percentage_comparison_bar_chart(
        declining, "metric_moves", models=["agent-001", "o3"], title="Moves", num_decimals=1
    )
    ax = fig.axes[0]
    first, change, baseline = ax.patches
    assert first.get_height() == pytest.approx(4.5)  # step 0: 4 and 5 moves, not scaled
    assert change.get_height() == pytest.approx(3.0 - 4.5)  # step 2: 6 - 3 moves
    assert baseline.get_height() == pytest.approx(5.2)
    assert {"RL -1.5", "3.0", "5.2"} <= {t.get_text() for t in ax.texts}
    assert ax.get_title() == "Moves"


def test_bars_without_models_and_errors(df: pl.DataFrame) -> None:
    fig = percentage_comparison_bar_chart(df.filter(pl.col("split") == "val"), "win")
    assert [t.get_text() for t in fig.axes[0].get_xticklabels()] == ["agent-001", "gpt-4o", "o3"]
    heights = [p.get_height() for p in fig.axes[0].patches]
    assert heights == pytest.approx([0.0, 100.0, 0.0, 0.0])  # agent: 0% then +100%; baselines never won
    with pytest.raises(ValueError, match="Column 'metric_nope' not found"):
        percentage_comparison_bar_chart(df, "nope")
    with pytest.raises(ValueError, match="No rows left after filtering"):
        percentage_comparison_bar_chart(df, "reward", models=["nobody"])


def test_a_returned_chart_saves_as_an_image(df: pl.DataFrame, tmp_path: Path) -> None:
    for name, fig in (
        ("progress.png", training_progress_chart(df, "reward", models=["agent-001", "gpt-4o"])),
        ("bars.png", percentage_comparison_bar_chart(df, "reward", models=["agent-001", "gpt-4o"])),
    ):
        fig.savefig(tmp_path / name)
        assert (tmp_path / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
