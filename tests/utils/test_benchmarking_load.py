"""`art.utils.benchmarking`'s tables: what `model.log` (and the reference's Parquet files) recorded comes
back as one polars row per trajectory, and per-step averages are the ones a user would compute by hand."""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from helpers_choices import make_choice

import art
from art.utils.trajectory_logging import write_trajectory_groups_parquet

pl = pytest.importorskip("polars", reason="needs the `benchmarking` extra")

from art.utils.benchmarking.aggregate_trajectories import (  # noqa: E402
    load_aggregated_trajectories,
    load_latest_metrics,
)
from art.utils.benchmarking.filter_model_split import filter_rename_model_split  # noqa: E402
from art.utils.benchmarking.load_trajectories import load_trajectories  # noqa: E402
from art.utils.benchmarking.types import BenchmarkModelKey  # noqa: E402

PROJECT = "tic-tac-toe"
CALL = {"id": "c1", "type": "function", "function": {"name": "lookup", "arguments": '{"q": "x"}'}}
FIXED = ["model", "split", "step", "reward", "group_number", "messages", "logs"]


def trajectory(reward: float, *, sampled: bool = True, **fields: object) -> art.Trajectory:
    answer = make_choice(f"answer {reward}") if sampled else {"role": "assistant", "content": "typed"}
    return art.Trajectory(
        messages_and_choices=[{"role": "user", "content": "your move"}, answer], reward=reward, **fields
    )


def tool_trajectory() -> art.Trajectory:
    """A sampled tool call, the tool's answer, then a sampled final turn."""
    return art.Trajectory(
        messages_and_choices=[
            {"role": "system", "content": "play well"},
            make_choice(None, tool_calls=[CALL]),
            {"role": "tool", "tool_call_id": "c1", "content": "x=1"},
            make_choice("done"),
        ],
        reward=1.0,
        metrics={"win": True, "moves": 3},
        metadata={"opponent": "random", "seed": 7},
        logs=["looked x up"],
    )


async def log_records(base: Path) -> None:
    """Two models, two splits, several steps; one step as the reference's Parquet, one gzipped."""
    agent = art.TrainableModel(name="agent-001", project=PROJECT, base_model="tiny", base_path=str(base))
    baseline = art.Model(name="gpt-4o", project=PROJECT, base_path=str(base))
    # agent, val, step 0: two groups of unequal size
    await agent.log(
        [
            art.TrajectoryGroup(
                [tool_trajectory(), trajectory(0.0, sampled=False, metrics={"win": False, "moves": 5})],
                metrics={"spread": 1.0},
                metadata={"scenario": "s1"},
            ),
            art.TrajectoryGroup([trajectory(0.5, metrics={"win": 0.5})], metadata={"scenario": "s2"}),
        ],
        split="val",
        step=0,
    )
    # agent, val, step 1
    await agent.log([art.TrajectoryGroup([trajectory(1.0, metrics={"win": 1.0})])], split="val", step=1)
    # agent, train, step 1 (and step 2 gzipped, as `storage.append_groups(compress=True)` writes)
    await agent.log([art.TrajectoryGroup([trajectory(0.25), trajectory(0.75)])], split="train", step=1)
    agent.storage.append_groups("train", 2, [art.TrajectoryGroup([trajectory(0.9)])], compress=True)
    # agent, val, step 2: the reference's Parquet file (its sampled turn must stay trainable)
    parquet_group = art.TrajectoryGroup(
        [trajectory(0.8, metrics={"win": 1.0}, logs=["from parquet"]), trajectory(0.6, metrics={"win": 0.0})],
        metrics={"spread": 0.2},
        metadata={"scenario": "s3"},
    )
    folder = agent.storage.trajectories_dir("val")
    write_trajectory_groups_parquet([parquet_group], folder / "0002.parquet")
    # the baseline: one val step
    await baseline.log([art.TrajectoryGroup([trajectory(0.4, sampled=False, metrics={"win": 0.0})])], step=0)


@pytest.fixture
async def records(tmp_path: Path) -> Path:
    base = tmp_path / ".art"
    await log_records(base)
    return base


async def test_one_row_per_logged_trajectory_in_model_split_step_order(records: Path) -> None:
    df = await load_trajectories(PROJECT, art_path=str(records))
    assert df.columns[: len(FIXED)] == FIXED
    # one column per key ever logged, each kind sorted by name ("scenario" is only group metadata)
    assert df.columns[len(FIXED) :] == [
        "metric_moves",
        "metric_win",
        "metadata_opponent",
        "metadata_seed",
        "group_metric_spread",
        "group_metadata_scenario",
    ]
    keys = list(zip(df["model"], df["split"], df["step"], df["reward"], strict=True))
    assert keys == [
        ("agent-001", "train", 1, 0.25),
        ("agent-001", "train", 1, 0.75),
        ("agent-001", "train", 2, 0.9),  # the gzipped file
        ("agent-001", "val", 0, 1.0),
        ("agent-001", "val", 0, 0.0),
        ("agent-001", "val", 0, 0.5),
        ("agent-001", "val", 1, 1.0),
        ("agent-001", "val", 2, 0.8),  # the Parquet file
        ("agent-001", "val", 2, 0.6),
        ("gpt-4o", "val", 0, 0.4),
    ]
    # one number per group across the table; a group's trajectories share it
    assert df["group_number"].to_list() == [1, 1, 2, 3, 3, 4, 5, 6, 6, 7]
    assert df.schema["reward"] == pl.Float64 and df.schema["metric_win"] == pl.Float64
    assert df.schema["metadata_seed"] == pl.Utf8


async def test_values_match_what_was_logged(records: Path) -> None:
    df = await load_trajectories(PROJECT, art_path=str(records))
    val0 = df.filter((pl.col("model") == "agent-001") & (pl.col("split") == "val") & (pl.col("step") == 0))
    tool_row, typed_row, small_group = val0.to_dicts()
    assert tool_row["metric_win"] == 1.0 and tool_row["metric_moves"] == 3.0  # True counts as 1.0
    assert typed_row["metric_win"] == 0.0 and small_group["metric_win"] == 0.5
    assert small_group["metric_moves"] is None  # a key the trajectory did not log
    assert (tool_row["metadata_opponent"], tool_row["metadata_seed"]) == ("random", "7")  # as text
    assert tool_row["group_metric_spread"] == typed_row["group_metric_spread"] == 1.0
    assert tool_row["group_metadata_scenario"] == typed_row["group_metadata_scenario"] == "s1"
    assert small_group["group_metadata_scenario"] == "s2" and small_group["group_metric_spread"] is None
    assert tool_row["logs"] == ["looked x up"] and typed_row["logs"] is None
    assert tool_row["messages"] == [
        {"role": "system", "content": "play well", "tool_calls": None, "trainable": False},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [{"function": {"name": "lookup", "arguments": '{"q": "x"}'}}],
            "trainable": True,
        },
        {"role": "tool", "content": "x=1", "tool_calls": None, "trainable": False},
        {"role": "assistant", "content": "done", "tool_calls": None, "trainable": True},
    ]
    # a hand-written assistant turn is not trainable; a sampled one is
    assert [m["trainable"] for m in typed_row["messages"]] == [False, False]
    assert [m["trainable"] for m in small_group["messages"]] == [False, True]


async def test_the_reference_parquet_step_keeps_its_sampled_turns_trainable(records: Path) -> None:
    df = await load_trajectories(PROJECT, art_path=str(records))
    first, second = df.filter((pl.col("split") == "val") & (pl.col("step") == 2)).to_dicts()
    assert first["messages"] == [
        {"role": "user", "content": "your move", "tool_calls": None, "trainable": False},
        {"role": "assistant", "content": "answer 0.8", "tool_calls": None, "trainable": True},
    ]
    assert (first["metric_win"], second["metric_win"]) == (1.0, 0.0)
    assert first["logs"] == ["from parquet"] and first["group_metric_spread"] == 0.2
    assert first["group_metadata_scenario"] == second["group_metadata_scenario"] == "s3"


async def test_models_picks_folders_and_default_art_path_is_dot_art(
    records: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    only = await load_trajectories(PROJECT, models=["gpt-4o", "not-there"], art_path=str(records))
    assert only["model"].to_list() == ["gpt-4o"] and only["reward"].to_list() == [0.4]
    monkeypatch.chdir(records.parent)  # records are in ./.art
    assert (await load_trajectories(PROJECT)).height == 10


async def test_nothing_to_read_gives_an_empty_dataframe(tmp_path: Path) -> None:
    assert (await load_trajectories("no-such-project", art_path=str(tmp_path))).shape == (0, 0)
    art.Model(name="quiet", project="empty", base_path=str(tmp_path)).storage.write_model_json({})
    assert (await load_trajectories("empty", art_path=str(tmp_path))).shape == (0, 0)


async def test_a_malformed_trajectory_file_is_an_error_naming_it(records: Path) -> None:
    folder = records / PROJECT / "models" / "gpt-4o" / "trajectories" / "val"
    bad = folder / "0003.jsonl"
    bad.write_text(json.dumps({"trajectories": "not a list"}) + "\n")
    with pytest.raises(ValueError, match=r"0003\.jsonl: line 1 is not a valid trajectory group"):
        await load_trajectories(PROJECT, art_path=str(records))
    bad.unlink()
    (folder / "0004.parquet").write_bytes(b"not parquet at all")
    with pytest.raises(ValueError, match=r"0004\.parquet"):
        await load_trajectories(PROJECT, art_path=str(records))


async def test_a_torn_last_line_is_skipped_with_a_warning(records: Path) -> None:
    path = records / PROJECT / "models" / "gpt-4o" / "trajectories" / "val" / "0000.jsonl"
    with open(path, "a") as f:
        f.write('{"trajectories": [')  # a write cut short by a crash
    with pytest.warns(UserWarning, match=r"0000\.jsonl: line 2 is not a complete JSON object"):
        df = await load_trajectories(PROJECT, models=["gpt-4o"], art_path=str(records))
    assert df["reward"].to_list() == [0.4]


async def test_gzip_and_plain_files_read_alike(tmp_path: Path) -> None:
    model = art.Model(name="m", project="p", base_path=str(tmp_path))
    model.storage.append_groups("val", 3, [art.TrajectoryGroup([trajectory(0.7)])], compress=True)
    path = model.storage.trajectories_path("val", 3)
    assert path.suffix == ".gz" and gzip.decompress(path.read_bytes())
    df = await load_trajectories("p", art_path=str(tmp_path))
    assert (df["step"].to_list(), df["reward"].to_list()) == ([3], [0.7])


async def test_aggregates_average_within_groups_then_across_them(records: Path) -> None:
    agg = await load_aggregated_trajectories(PROJECT, art_path=str(records))
    assert agg.columns == ["model", "split", "step", "metric_moves", "metric_win"]
    val = agg.filter((pl.col("model") == "agent-001") & (pl.col("split") == "val"))
    # step 0: win 1.0 and 0.0 in group 1, 0.5 in group 2; moves 3 and 5 in group 1 only (4.0)
    assert val["step"].to_list() == [0, 1, 2]
    assert val["metric_win"].to_list() == [0.5, 1.0, 0.5]
    assert val["metric_moves"].to_list() == [4.0, None, None]
    win_only = await load_aggregated_trajectories(PROJECT, metrics=["win"], art_path=str(records))
    assert win_only.columns == ["model", "split", "step", "metric_win"]


async def test_group_weighting_and_reward_spread(tmp_path: Path) -> None:
    """Three trajectories in one group and one in another: the step's mean is the mean of group means."""
    model = art.Model(name="m", project="p", base_path=str(tmp_path))
    groups = [
        art.TrajectoryGroup([trajectory(r, metrics={"reward": r}) for r in (0.0, 0.0, 1.0)]),
        art.TrajectoryGroup([trajectory(1.0, metrics={"reward": 1.0})]),
    ]
    await model.log(groups, split="val", step=4)
    agg = await load_aggregated_trajectories("p", art_path=str(tmp_path), include_history=True)
    row = agg.to_dicts()[0]
    assert row["metric_reward"] == pytest.approx((1 / 3 + 1.0) / 2)  # the row mean would be 0.5
    # std within group 1 (sample std of 0, 0, 1) averaged with group 2's (undefined for one trajectory)
    assert row["metric_reward_std_dev"] == pytest.approx((1 / 3) ** 0.5)
    assert row["recorded_at"] == model.history()[0]["recorded_at"]


async def test_history_timestamps_are_the_first_row_logged_for_each_step(records: Path) -> None:
    agg = await load_aggregated_trajectories(PROJECT, art_path=str(records), include_history=True)
    history = art.Model(name="agent-001", project=PROJECT, base_path=str(records)).history()
    first_at = {}
    for row in history:
        first_at.setdefault(row["step"], row["recorded_at"])
    agent = agg.filter(pl.col("model") == "agent-001")
    assert agent["recorded_at"].to_list() == [first_at.get(s) for s in agent["step"]]
    assert agent.filter(pl.col("step") == 1)["recorded_at"].to_list() == [first_at[1]] * 2  # train and val


async def test_latest_metrics_take_each_models_last_step_of_the_split(records: Path) -> None:
    latest = await load_latest_metrics(PROJECT, art_path=str(records))
    assert latest.rows() == [("agent-001", 2, None, 0.5), ("gpt-4o", 0, None, 0.0)]
    assert latest.columns == ["model", "step", "metric_moves", "metric_win"]
    train = await load_latest_metrics(PROJECT, split="train", metrics=["win"], art_path=str(records))
    assert train.rows() == [("agent-001", 2, None)]


async def test_filter_rename_keeps_each_model_at_its_split(records: Path) -> None:
    df = await load_trajectories(PROJECT, art_path=str(records))
    keys = [
        BenchmarkModelKey("agent-001", "Agent (train)", "train"),
        BenchmarkModelKey("agent-001", "Agent"),
        BenchmarkModelKey("gpt-4o"),
    ]
    out = filter_rename_model_split(df, keys)
    counts = dict(out.group_by("model").len().iter_rows())
    assert counts == {"Agent (train)": 3, "Agent": 6, "gpt-4o": 1}
    assert filter_rename_model_split(df, []).height == 0


def test_polars_missing_names_the_extra_and_import_art_stays_light() -> None:
    code = (
        "import sys\n"
        "import art, art.utils\n"
        "assert 'polars' not in sys.modules and 'matplotlib' not in sys.modules, 'import art is heavy'\n"
        "sys.modules['polars'] = None  # as if it were not installed\n"
        "from art.utils.benchmarking.types import BenchmarkModelKey  # needs nothing\n"
        "for name in ('load_trajectories', 'filter_model_split', 'aggregate_trajectories', 'charts'):\n"
        "    try:\n"
        "        __import__('art.utils.benchmarking.' + name)\n"
        "    except ImportError as e:\n"
        "        print(name, e)\n"
    )
    src = str(Path(art.__file__).resolve().parents[1])  # this checkout's art, not another install
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([src, os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, env=env)
    assert done.returncode == 0, done.stderr[-2000:]
    lines = done.stdout.splitlines()
    assert len(lines) == 4, lines
    for line in lines:
        assert "needs polars" in line and "pip install 'agent-reinforcement-trainer[benchmarking]'" in line
