"""art.utils.sft without a model: schedules, chunks, streaming files, bad lines, resuming, and the
client side of `model.train_sft` (checked against the Backend test double)."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest

import art
from art.utils.sft import (
    SFTFileError,
    create_lr_schedule,
    create_sft_dataset_iterator,
    get_file_row_count,
    iterate_file,
    train_sft_from_file,
)


def line(i: int) -> dict[str, Any]:
    return {"messages": [{"role": "user", "content": f"q{i}"}, {"role": "assistant", "content": f"a{i}"}]}


def write(path: Path, rows: list[Any]) -> Path:
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows))
    return path


def answers(trajectories: list[art.Trajectory]) -> list[str]:
    return [t.messages()[-1]["content"] for t in trajectories]


# ---- schedules ----------------------------------------------------------------------------------


def test_lr_schedules_against_hand_computed_values() -> None:
    assert create_lr_schedule(5, 1e-4, "linear", warmup_steps=1) == pytest.approx(
        [1e-4, 1e-4, 2e-4 / 3, 1e-4 / 3, 0.0]
    )
    # warmup 0.1 + 0.9 * 1/2, peak; then cos from 0 to pi over 4 steps, floor 0.1
    assert create_lr_schedule(6, 1.0, "cosine", warmup_steps=2, min_lr=0.1) == pytest.approx(
        [0.55, 1.0, 1.0, 0.1 + 0.9 * 0.75, 0.1 + 0.9 * 0.25, 0.1]
    )
    assert create_lr_schedule(4, 2.0, "constant", warmup_steps=2) == pytest.approx([1.0, 2.0, 2.0, 2.0])
    assert create_lr_schedule(3, 3.0, "linear", min_lr=1.0) == pytest.approx([3.0, 2.0, 1.0])
    assert create_lr_schedule(0, 1.0) == []
    assert create_lr_schedule(1, 1e-4) == [1e-4]
    with pytest.raises(ValueError, match="Unknown method: step"):
        create_lr_schedule(3, 1.0, "step")  # type: ignore[arg-type]


def test_dataset_iterator_slices_one_schedule_and_resumes() -> None:
    trajectories = [
        art.Trajectory.model_validate({"messages_and_choices": line(i)["messages"]}) for i in range(10)
    ]
    chunks = list(
        create_sft_dataset_iterator(
            trajectories, chunk_size=2, epochs=2, batch_size=2, peak_lr=1.0, show_progress=False
        )
    )
    full = create_lr_schedule(10, 1.0, "linear", warmup_steps=1)
    assert [c.step for c in chunks] == [0, 2, 4, 5, 7, 9]
    assert [(c.epoch, c.epoch_step) for c in chunks] == [(0, 0), (0, 2), (0, 4), (1, 0), (1, 2), (1, 4)]
    assert [lr for c in chunks for lr in c.config.learning_rate] == full  # type: ignore[union-attr]
    assert all(c.config.batch_size == 2 for c in chunks)
    epoch0 = [t for c in chunks[:3] for t in c.trajectories]
    epoch1 = [t for c in chunks[3:] for t in c.trajectories]
    assert sorted(answers(epoch0)) == sorted(answers(trajectories)) == sorted(answers(epoch1))
    assert answers(epoch0) != answers(epoch1)  # each epoch shuffled with its own seed
    # Resuming after the first three chunks (5 batches trained) continues with the fourth.
    resumed = list(
        create_sft_dataset_iterator(
            trajectories,
            chunk_size=2,
            epochs=2,
            batch_size=2,
            peak_lr=1.0,
            initial_step=5,
            show_progress=False,
        )
    )
    assert [(c.step, answers(c.trajectories)) for c in resumed] == [
        (c.step, answers(c.trajectories)) for c in chunks[3:]
    ]
    with pytest.warns(UserWarning, match="got no trajectories: it yields no chunks"):
        assert list(create_sft_dataset_iterator([], show_progress=False)) == []  # as the reference


# ---- files ---------------------------------------------------------------------------------------


def test_iterate_file_streams_a_seeded_shuffle(tmp_path: Path) -> None:
    path = write(tmp_path / "data.jsonl", [line(i) for i in range(40)])
    first = list(iterate_file(str(path), shuffle_buffer_size=5, seed=7))
    assert sorted(answers(first)) == sorted(f"a{i}" for i in range(40))
    assert answers(first) != [f"a{i}" for i in range(40)]
    assert answers(first) == answers(list(iterate_file(str(path), shuffle_buffer_size=5, seed=7)))
    assert answers(first) != answers(list(iterate_file(str(path), shuffle_buffer_size=5, seed=8)))
    # Only the buffer is in memory: the k-th trajectory out comes from the first k + 5 lines.
    assert all(int(t.metadata["source_line"]) <= k + 5 for k, t in enumerate(first))
    assert first[0].metadata == {"source_file": str(path), "source_line": first[0].metadata["source_line"]}
    two = list(iterate_file(str(path), epochs=2, shuffle_buffer_size=5, seed=7))
    assert len(two) == 80 and answers(two[:40]) == answers(first) and answers(two[40:]) != answers(first)
    assert answers(
        list(iterate_file(str(path), epochs=2, shuffle_buffer_size=5, seed=7, initial_skip=33))
    ) == answers(two[33:])
    assert get_file_row_count(str(path)) == 40


BAD_LINES = [
    ("{not json", r"line 2: not valid JSON \(.*column 2\); write one JSON object per line"),
    (
        {"messages": [{"role": "user", "content": "q"}]},
        r"line 2: messages\[0\].role is 'user': an SFT conversation must end with the assistant turn",
    ),
    (
        {"messages": [{"role": "robot", "content": "q"}, {"role": "assistant", "content": "a"}]},
        r"line 2: messages\[0\].role: unknown role 'robot'; use one of",
    ),
    (
        {
            "messages": [
                {"role": "user", "content": "q"},
                {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [
                        {"id": "c", "type": "function", "function": {"name": "f", "arguments": {"x": 1}}}
                    ],
                },
            ]
        },
        r"line 2: messages\[1\].tool_calls\[0\].function.arguments: must be a JSON string .* use json.dumps",
    ),
    ({"prompt": "q", "completion": "a"}, r'line 2: expected a JSON object with a "messages" list'),
]


@pytest.mark.parametrize(("bad", "message"), BAD_LINES)
async def test_bad_lines_name_the_file_the_line_and_the_fix(
    tmp_path: Path, fake_backend: Any, bad: Any, message: str
) -> None:
    path = write(tmp_path / "data.jsonl", [line(0), bad, line(2), "", line(3)])
    with pytest.raises(SFTFileError, match=rf"data.jsonl, {message}.*skip_invalid=True"):
        list(iterate_file(str(path)))
    model = art.TrainableModel(name="m", project="p", base_model="tiny", base_path=str(tmp_path))
    await model.register(fake_backend)
    with pytest.raises(SFTFileError, match=rf"data.jsonl, {message}"):
        await train_sft_from_file(model, str(path))
    assert fake_backend.sft_calls == []  # nothing reached the backend
    # skip_invalid: skipped, counted, reported
    assert answers(list(iterate_file(str(path), skip_invalid=True))) != []
    with pytest.warns(UserWarning, match=r"skipped 1 invalid line\(s\) of .*data.jsonl \(lines 2\)"):
        result = await train_sft_from_file(model, str(path), skip_invalid=True, batch_size=1)
    assert sorted(answers(fake_backend.sft_calls[0]["trajectories"])) == ["a0", "a2", "a3"]
    assert fake_backend.sft_calls[0]["spec"].skip_invalid
    assert result.metrics["data/num_invalid_lines"] == 1
    assert any(e.get("data/num_invalid_lines") == 1 for e in model.history())


async def test_empty_files_and_wrong_names_fail_before_any_model_work(
    tmp_path: Path, fake_backend: Any
) -> None:
    model = art.TrainableModel(name="m", project="p", base_model="tiny", base_path=str(tmp_path))
    await model.register(fake_backend)
    empty = write(tmp_path / "empty.jsonl", ["", "  "])
    with pytest.raises(ValueError, match=r"empty.jsonl has no training examples"):
        await train_sft_from_file(model, str(empty))
    (tmp_path / "data.json").write_text(json.dumps(line(0)))
    with pytest.raises(ValueError, match=r"Only JSONL files are supported.*data.json"):
        await train_sft_from_file(model, str(tmp_path / "data.json"))
    with pytest.raises(FileNotFoundError, match=r"missing\.jsonl: no such file"):
        await train_sft_from_file(model, str(tmp_path / "missing.jsonl"))
    data = write(tmp_path / "data.jsonl", [line(i) for i in range(4)])
    with pytest.raises(ValueError, match=r"initial_step=2 is past the end of the run: .* makes 2 batches"):
        await train_sft_from_file(model, str(data), initial_step=2)
    assert fake_backend.sft_calls == []


async def test_train_sft_from_file_resumes_with_initial_step(tmp_path: Path, fake_backend: Any) -> None:
    path = write(tmp_path / "data.jsonl", [line(i) for i in range(10)])
    model = art.TrainableModel(name="m", project="p", base_model="tiny", base_path=str(tmp_path))
    await model.register(fake_backend)
    options: dict[str, Any] = {
        "epochs": 2,
        "batch_size": 3,
        "peak_lr": 1.0,
        "schedule_type": "cosine",
        "shuffle_buffer_size": 4,
    }
    result = await train_sft_from_file(model, str(path), **options)
    full = fake_backend.sft_calls[-1]
    assert result.step == 1
    lrs = full["spec"].learning_rate
    assert lrs == create_lr_schedule(
        7, 1.0, "cosine", warmup_steps=0
    )  # ceil(20 / 3) batches, int(0.7) warmup
    assert len(full["trajectories"]) == 20 and full["spec"].batch_size == 3
    # Two segments: batches 0-2, then 3 to the end; together exactly the full run.
    await train_sft_from_file(model, str(path), final_step=3, **options)
    await train_sft_from_file(model, str(path), initial_step=3, **options)
    first, second = fake_backend.sft_calls[-2:]
    assert answers(first["trajectories"]) == answers(full["trajectories"][:9])
    assert answers(second["trajectories"]) == answers(full["trajectories"][9:])
    assert first["spec"].learning_rate == lrs[:3] and second["spec"].learning_rate == lrs[3:]
    assert await model.get_step() == 3  # one checkpoint per call


# ---- model.train_sft's checks (before the backend does anything) ------------------------------------


async def test_model_train_sft_checks_its_input_and_logs_one_entry(tmp_path: Path, fake_backend: Any) -> None:
    model = art.TrainableModel(name="m", project="p", base_model="tiny", base_path=str(tmp_path))
    await model.register(fake_backend)
    good = [art.Trajectory.model_validate({"messages_and_choices": line(i)["messages"]}) for i in range(3)]
    with pytest.raises(ValueError, match="got an empty list of trajectories"):
        await model.train_sft([])
    with pytest.raises(ValueError, match="got no trajectories"):
        await model.train_sft(t for t in [])
    no_answer = art.Trajectory(messages_and_choices=[{"role": "user", "content": "q"}])
    with pytest.raises(ValueError, match=r"trajectories\[3\]: messages_and_choices\[0\].role is 'user'"):
        await model.train_sft([*good, no_answer])
    with pytest.raises(ValueError, match=r"learning_rate has 1 values but 3 trajectories make 2 batches"):
        await model.train_sft(good, art.TrainSFTConfig(learning_rate=[1e-4], batch_size=2))
    with pytest.raises(ValueError, match=r"batch_size=\"auto\""):
        await model.train_sft(good, art.TrainSFTConfig(learning_rate=[1e-4, 1e-4]))
    with pytest.raises(ValueError, match=r"learning_rate\[1\] must be a number in \[0, 1.0\], got -1.0"):
        art.TrainSFTConfig(learning_rate=[1e-4, -1.0])
    with pytest.raises(TypeError, match="unknown SFT option"):
        await model.train_sft(good, _config={"learning_rat": 1.0})
    assert fake_backend.sft_calls == []
    result = await model.train_sft(iter(good), art.TrainSFTConfig(learning_rate=1e-4, batch_size=2))
    assert result.step == 1 and model.get_inference_name() == "m@1"
    assert [e["step"] for e in model.history()] == [1] and model.history()[0]["loss/train"] == 0.5
    assert math.isclose(fake_backend.sft_calls[0]["spec"].learning_rate, 1e-4)
