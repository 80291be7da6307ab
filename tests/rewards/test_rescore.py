"""rescore: stored groups re-judged from the on-disk record, no rollouts, record untouched."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from judge_helpers import group_of
from scripted_judge import Script

import art
from art.record.storage import ModelStorage
from art.rewards import JudgeAnswerError, rescore, ruler_score_group


async def write_record(tmp_path: Path, make_judge: Any) -> art.Model:
    """Two logged steps of a model: step 0 raw rewards (one group gz), step 1 scored by a judge."""
    model = art.Model(name="agent-1", project="proj", base_path=str(tmp_path / ".art"))
    storage = model.storage
    storage.append_groups(
        "train",
        0,
        [
            group_of("MARK:0.9", "MARK:0.2", "MARK:0.5", rewards=[1.0, 0.0, 0.5]),
            group_of("MARK:0.7", rewards=[1.0]),  # a group of one: cannot be compared
        ],
        compress=True,
    )
    scored = await ruler_score_group(
        group_of("MARK:0.1", "MARK:0.8", rewards=[0.0, 1.0]), make_judge(), cache=False
    )
    assert scored is not None
    storage.append_groups("train", 1, [scored])
    storage.append_groups("val", 1, [group_of("MARK:0.4", "MARK:0.6")])
    return model


async def test_rescore_a_model_with_a_new_judge(script: Script, make_judge: Any, tmp_path: Path) -> None:
    model = await write_record(tmp_path, make_judge)
    record = model.storage.root
    before = {p: p.read_bytes() for p in record.rglob("*") if p.is_file()}
    script.reset()

    result = await rescore(model, make_judge("reverse"), rubric="Prefer lower markers.")
    assert script.count == 2  # no rollouts, one judgement per comparable group
    assert result.steps == [0, 1]
    assert [[t.reward for t in g.trajectories] for g in result.groups] == [[0.1, 0.8, 0.5], [0.9, 0.2]]
    assert "Prefer lower markers." in script.requests[0]["messages"][0]["content"]
    # Step 0: calibration against the hand-written reward; step 1: the old judge's independent reward is
    # kept, and the new judge is compared with the old one.
    step0, step1 = result.groups
    assert step0.metrics["ruler_calibration_spearman"] == pytest.approx(-1.0)
    assert [t.metrics["independent_reward"] for t in step1.trajectories] == [0.0, 1.0]
    assert step1.metrics["ruler_previous_agreement"] == pytest.approx(-1.0)
    assert result.metrics["ruler_calibration_spearman"] == pytest.approx(-1.0)
    assert result.metrics["num_groups"] == 2 and result.metrics["num_skipped"] == 1
    (skipped,) = result.skipped
    assert (skipped.step, skipped.index) == (0, 1) and "nothing to compare" in skipped.reason
    assert list(result.by_step()) == [0, 1]
    # The record is never modified.
    assert {p: p.read_bytes() for p in record.rglob("*") if p.is_file()} == before

    # Re-running costs nothing (cache), and picks steps and splits as asked.
    again = await rescore(model.storage, make_judge("reverse"), rubric="Prefer lower markers.", steps=[1])
    assert script.count == 2 and again.steps == [1]
    val = await rescore(model, make_judge(), split="val")
    assert [t.reward for t in val.groups[0].trajectories] == [0.4, 0.6]


async def test_rescore_from_a_file_or_folder(script: Script, make_judge: Any, tmp_path: Path) -> None:
    model = await write_record(tmp_path, make_judge)
    folder = model.storage.trajectories_dir("train")
    by_file = await rescore(folder / "0000.jsonl.gz", make_judge(), cache=False)
    assert by_file.steps == [0] and len(by_file.groups) == 1
    by_folder = await rescore(folder, make_judge(), cache=False, steps=1)
    assert by_folder.steps == [1]


async def test_rescore_errors(script: Script, make_judge: Any, tmp_path: Path) -> None:
    model = await write_record(tmp_path, make_judge)
    with pytest.raises(ValueError, match="no trajectories were logged for split 'test'"):
        await rescore(model, make_judge(), split="test")
    with pytest.raises(ValueError, match=r"steps \[7\]"):
        await rescore(model, make_judge(), steps=[7])
    with pytest.raises(FileNotFoundError, match="no such file"):
        await rescore(tmp_path / "nope.jsonl", make_judge())
    with pytest.raises(TypeError, match=r"art\.Model"):
        await rescore(42, make_judge())  # type: ignore[arg-type]

    broken = ModelStorage(tmp_path / ".art", "proj", "broken")
    broken.append_groups("train", 0, [group_of("MARK:0.1", "MARK:0.2"), group_of("ALWAYS_GARBAGE", "x")])
    with pytest.raises(JudgeAnswerError) as info:
        await rescore(broken, make_judge(), cache=False)
    assert "while re-scoring step 0, group 1" in "".join(info.value.__notes__)
    tolerant = await rescore(broken, make_judge(), cache=False, swallow_exceptions=True)
    assert len(tolerant.groups) == 1 and "JudgeAnswerError" in tolerant.skipped[0].reason


async def test_rescore_groups_in_memory(make_judge: Any) -> None:
    result = await rescore([group_of("MARK:0.3", "MARK:0.6")], make_judge(), cache=False)
    assert result.steps == [None] and [t.reward for t in result.groups[0].trajectories] == [0.3, 0.6]
