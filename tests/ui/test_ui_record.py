"""Reading a record for `art ui` / `art show`: lazy, tolerant of torn and unfinished lines, never writing."""

from __future__ import annotations

import gzip
import os
from pathlib import Path

import pytest
from conftest import write_record

from art.record.storage import ModelStorage
from art.ui.record import RecordReader


def snapshot(root: Path) -> dict[str, tuple[int, int]]:
    """Every file and folder under `root` with its size and modification time."""
    out = {}
    for folder, dirs, files in os.walk(root):
        for name in [*dirs, *files]:
            st = os.stat(os.path.join(folder, name))
            out[os.path.relpath(os.path.join(folder, name), root)] = (st.st_size, st.st_mtime_ns)
    return out


def test_models_are_found_from_a_record_a_project_or_a_model_folder(record: ModelStorage) -> None:
    for root in (record.base_path, record.base_path / "proj", record.root):
        models, problems = RecordReader(root).models()
        assert [m.id for m in models] == ["proj/agent"] and problems == []
    reader = RecordReader(record.base_path)
    assert reader.model("proj", "agent") is not None
    assert reader.model("..", "agent") is None and reader.model("proj", "../proj/models/agent") is None


def test_a_path_that_is_not_a_record_says_so(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("hello")
    for path, expected in (
        (tmp_path, "is not an ART record"),
        (tmp_path / "missing", "does not exist"),
        (tmp_path / "notes.txt", "is a file"),
    ):
        models, problems = RecordReader(path).models()
        assert models == [] and expected in problems[0], problems


def test_a_step_matches_the_trainers_record_by_content(record: ModelStorage) -> None:
    reader = RecordReader(record.base_path)
    (model,) = reader.models()[0]
    assert reader.splits(model) == ["train", "val"]
    assert reader.steps(model, "train") == [1, 2, 3] and reader.steps(model, "val") == [0, 3]
    step = reader.step(model, "train", 2)
    assert step.problems == [] and len(step.groups) == 2 and step.num_trajectories == 6
    advantages = [t.advantage for g in step.trained if g for t in g.trajectories]
    assert advantages == pytest.approx([-0.5, 0.0, 0.5, -0.3, -0.1, 0.4])
    # a held-out split has no trainer record
    assert reader.step(model, "val", 3).trained == [None, None]


def test_a_record_older_than_the_trainer_file_still_loads(tmp_path: Path) -> None:
    storage = write_record(tmp_path, steps=2, trainer=False)
    reader = RecordReader(tmp_path)
    (model,) = reader.models()[0]
    step = reader.step(model, "train", 1)
    assert (
        step.problems == [] and len(step.groups) == 2 and step.trained == [None, None] and step.records == []
    )
    assert storage.read_trainer_records("train", 1) == []


def test_torn_and_unfinished_lines_are_reported_and_the_rest_is_shown(record: ModelStorage) -> None:
    path = record.trajectories_path("train", 2)
    text = path.read_text()
    first, second = text.splitlines()
    path.write_text(first[:50] + "\n" + second + "\n" + second[:30])  # torn line, then one being written
    with open(record.history_path, "a") as f:
        f.write('{"step": 9, "train/rew')
    reader = RecordReader(record.base_path)
    (model,) = reader.models()[0]
    step = reader.step(model, "train", 2)
    assert len(step.groups) == 1 and step.trained[0] is not None  # the readable group, still matched
    assert len(step.problems) == 2
    assert "line 1 is not a complete JSON object" in step.problems[0]
    assert "line 3" in step.problems[1] and "still being written" in step.problems[1]
    rows, problems = reader.history(model)
    assert len(rows) == 5 and "still being written" in problems[0]


def test_a_torn_gzip_step_file_is_read_up_to_the_tear(record: ModelStorage) -> None:
    plain = record.trajectories_path("val", 3)
    data = gzip.compress(plain.read_bytes())
    plain.unlink()
    (plain.parent / "0003.jsonl.gz").write_bytes(data + gzip.compress(b'{"trajectories": []}\n')[:15])
    reader = RecordReader(record.base_path)
    step = reader.step(reader.models()[0][0], "val", 3)
    assert len(step.groups) == 2 and "incomplete gzip data" in step.problems[0]


def test_reading_everything_writes_nothing(record: ModelStorage) -> None:
    with open(record.trajectories_path("train", 1), "a") as f:
        f.write('{"torn')  # a torn tail that a writer would repair: the reader must not
    before = snapshot(record.base_path)
    reader = RecordReader(record.base_path)
    for model in reader.models()[0]:
        reader.history(model)
        reader.checkpoints(model)
        reader.version(model)
        for split in reader.splits(model):
            for step in reader.steps(model, split):
                reader.step(model, split, step)
    assert snapshot(record.base_path) == before


def test_a_changed_file_is_read_again(record: ModelStorage) -> None:
    reader = RecordReader(record.base_path)
    (model,) = reader.models()[0]
    version = reader.version(model)
    assert len(reader.history(model)[0]) == 5
    record.append_history(4, {"train/reward": 0.4})
    assert len(reader.history(model)[0]) == 6 and reader.version(model) != version
