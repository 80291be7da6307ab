"""The reference's Parquet trajectory files: written and read back here, and found by ModelStorage in a
model folder the reference left behind."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers_choices import make_choice

import art
from art.record.storage import ModelStorage
from art.utils.trajectory_logging import read_trajectory_groups_parquet, write_trajectory_groups_parquet

pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")

TOOLS = [{"type": "function", "function": {"name": "lookup", "parameters": {"type": "object"}}}]
CALL = {"id": "c1", "type": "function", "function": {"name": "lookup", "arguments": '{"q": "x"}'}}


def groups() -> list[art.TrajectoryGroup]:
    agent = art.Trajectory(
        messages_and_choices=[
            {"role": "system", "content": "be brief"},
            {"role": "user", "content": "find x"},
            make_choice(content=None, tool_calls=[CALL]),
            {"role": "tool", "tool_call_id": "c1", "content": "x=1"},
            make_choice(content="x is 1"),
        ],
        tools=TOOLS,
        reward=0.75,
        metrics={"tool_calls": 1},
        metadata={"scenario": "s1"},
        logs=["looked up x"],
    )
    other = art.Trajectory(messages_and_choices=[{"role": "user", "content": "hi"}], reward=-1.0)
    return [
        art.TrajectoryGroup([agent, other], metadata={"difficulty": "easy"}, metrics={"n": 2}, logs=["g"]),
        art.TrajectoryGroup([art.Trajectory(reward=0.5)]),
    ]


def test_groups_round_trip_with_what_the_format_keeps(tmp_path: Path) -> None:
    path = tmp_path / "0003.parquet"
    write_trajectory_groups_parquet(groups(), path)
    back = read_trajectory_groups_parquet(path)
    assert [len(g.trajectories) for g in back] == [2, 1]
    assert (
        back[0].metadata == {"difficulty": "easy"} and back[0].metrics == {"n": 2} and back[0].logs == ["g"]
    )
    agent = back[0].trajectories[0]
    assert agent.reward == 0.75 and agent.tools == TOOLS and agent.logs == ["looked up x"]
    assert agent.metrics == {"tool_calls": 1} and agent.metadata == {"scenario": "s1"}
    assert agent.messages_and_choices == [
        {"role": "system", "content": "be brief"},
        {"role": "user", "content": "find x"},
        {"role": "assistant", "content": None, "tool_calls": [CALL]},  # sampled turns: plain messages now
        {"role": "tool", "content": "x=1", "tool_call_id": "c1"},
        {"role": "assistant", "content": "x is 1"},
    ]
    assert back[1].trajectories[0].reward == 0.5


def test_the_file_has_the_reference_schema_and_marks_sampled_turns(tmp_path: Path) -> None:
    path = tmp_path / "0001.parquet"
    write_trajectory_groups_parquet(groups(), path)
    table = pq.read_table(path)
    assert table.schema.names == [
        "group_index", "group_metadata", "group_metrics", "group_logs", "reward", "metrics", "metadata",
        "tools", "logs", "messages",
    ]  # fmt: skip
    assert pq.ParquetFile(path).metadata.row_group(0).column(0).compression == "ZSTD"
    messages = table.column("messages").to_pylist()[0]
    assert [m["trainable"] for m in messages] == [False, False, True, False, True]
    assert json.loads(messages[2]["tool_calls"]) == [CALL]
    write_trajectory_groups_parquet([], tmp_path / "empty.parquet")
    assert read_trajectory_groups_parquet(tmp_path / "empty.parquet") == []


def test_model_storage_reads_the_reference_parquet_logs_of_a_step(tmp_path: Path) -> None:
    storage = ModelStorage(tmp_path, "p", "m")
    folder = storage.trajectories_dir("train")
    folder.mkdir(parents=True)
    write_trajectory_groups_parquet(groups(), folder / "0002.parquet")  # as the reference logged step 2
    storage.append_groups("train", 3, groups()[1:])
    assert storage.logged_steps("train") == [2, 3]
    assert [len(g.trajectories) for g in storage.read_groups("train", 2)] == [2, 1]
    storage.append_groups("train", 2, groups()[1:])  # logged here later: the reference's groups come first
    assert [len(g.trajectories) for g in storage.read_groups("train", 2)] == [2, 1, 1]
    assert len(read_trajectory_groups_parquet(folder / "0002.parquet")) == 3  # the copy holds the whole step


def test_a_broken_file_is_named(tmp_path: Path) -> None:
    table = pa.table({"group_index": [0], "reward": [1.0], "metrics": ["{not json"], "messages": [[]]})
    pq.write_table(table, tmp_path / "bad.parquet")
    with pytest.raises(ValueError, match=r"bad\.parquet: metrics is not JSON"):
        read_trajectory_groups_parquet(tmp_path / "bad.parquet")
    with pytest.raises(FileNotFoundError, match="no Parquet trajectory file"):
        read_trajectory_groups_parquet(tmp_path / "missing.parquet")


def test_without_pyarrow_the_error_gives_the_install_command(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(__import__("sys").modules, "pyarrow", None)
    with pytest.raises(ImportError, match=r"pip install 'agent-reinforcement-trainer\[parquet\]'"):
        write_trajectory_groups_parquet(groups(), tmp_path / "x.parquet")


def test_model_log_writes_a_parquet_copy_beside_the_lossless_json_lines(tmp_path: Path) -> None:
    """The reference's tools find `{step:04d}.parquet`; our readers keep reading the JSON lines (token ids
    and logprobs), once: the copy is never read as more groups."""
    import asyncio

    model = art.Model(name="m", project="p", base_path=str(tmp_path))
    asyncio.run(model.log(groups(), split="val", step=4))
    extra = art.TrajectoryGroup([art.Trajectory(reward=0.25)])
    asyncio.run(model.log([extra], split="val", step=4))  # a second log of the step appends
    folder = model.storage.trajectories_dir("val")
    assert sorted(p.name for p in folder.iterdir()) == ["0004.jsonl", "0004.parquet"]
    copy = read_trajectory_groups_parquet(folder / "0004.parquet")
    assert [len(g.trajectories) for g in copy] == [2, 1, 1]  # the whole step, as in the JSON lines
    read = model.storage.read_groups("val", 4)
    assert [len(g.trajectories) for g in read] == [2, 1, 1]
    assert read[0].trajectories[0].messages_and_choices[2].logprobs is not None  # lossless: from JSON lines
    assert model.storage.logged_steps("val") == [4]


def test_without_pyarrow_model_log_still_writes_the_json_lines(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import asyncio

    import art.record.storage

    monkeypatch.setitem(__import__("sys").modules, "pyarrow", None)
    monkeypatch.setattr(art.record.storage, "_parquet_warned", False)
    model = art.Model(name="m", project="p", base_path=str(tmp_path))
    with pytest.warns(UserWarning, match=r"without the reference's Parquet copy.*pip install"):
        asyncio.run(model.log(groups(), split="val"))
    assert [p.name for p in model.storage.trajectories_dir("val").iterdir()] == ["0000.jsonl"]
