"""The record a real short training run writes (tiny model, LocalBackend) holds what `art ui` shows: each
trajectory's advantage from the trainer, per-token trainer values, token stats; `art show` prints a group;
W&B's table gets the advantage and the judge's explanation."""

from __future__ import annotations

import math
import re
from pathlib import Path

import pytest

import art
from art.cli import main
from art.integrations.wandb import TABLE_COLUMNS, recorded_advantages, table_rows
from art.record.storage import ModelStorage, group_fingerprint
from art.training.advantages import group_advantages


def storage_of(model_dir: Path) -> ModelStorage:
    return ModelStorage(model_dir.parents[2], model_dir.parents[1].name, model_dir.name)


def test_the_trainer_wrote_every_trajectorys_advantage_and_token_values(trained_record: Path) -> None:
    storage = storage_of(trained_record)
    for step in (1, 2):
        groups = storage.read_groups("train", step)
        (record,) = storage.read_trainer_records("train", step)
        assert record.step == step and record.updated
        by_fingerprint = storage.trained_groups("train", step)
        assert set(by_fingerprint) == {group_fingerprint(g) for g in groups}
        trained_tokens = 0
        for group in groups:
            trained = by_fingerprint[group_fingerprint(group)]
            expected = group_advantages([t.reward for t in group.trajectories])
            assert [t.advantage for t in trained.trajectories] == pytest.approx(expected, abs=1e-5)
            for t, tt in zip(group.trajectories, trained.trajectories, strict=True):
                (turn,) = tt.turns
                sampled = t.messages_and_choices[turn.item].logprobs.content  # type: ignore[union-attr]
                assert len(turn.trained) == len(sampled) and all(turn.trained)
                for entry, lp, ratio in zip(sampled, turn.trainer_logprob, turn.ratio, strict=True):
                    assert lp is not None and ratio == pytest.approx(math.exp(lp - entry.logprob), rel=1e-4)
                trained_tokens += tt.trained_tokens
        assert record.token_stats.trained_tokens == trained_tokens > 0
        row = next(r for r in storage.read_history() if r["step"] == step and "loss/train" in r)
        assert row["data/step_trainer_tokens"] == trained_tokens


def test_wandbs_table_gets_the_advantage_and_the_judges_explanation(trained_record: Path) -> None:
    storage = storage_of(trained_record)
    model = art.TrainableModel(
        name=storage.name, project=storage.project, base_model="x", base_path=str(storage.base_path)
    )
    groups = storage.read_groups("train", 1)
    advantages = recorded_advantages(model, "train", 1, groups)
    rows = table_rows(1, groups, advantages)
    column = {name: i for i, name in enumerate(TABLE_COLUMNS)}
    assert [r[column["advantage"]] for r in rows] == [a for g in advantages or [] for a in g]
    assert all(isinstance(r[column["advantage"]], float) for r in rows)
    assert all("of it is digits" in r[column["judge_explanation"]] for r in rows)
    assert recorded_advantages(model, "val", 0, storage.read_groups("val", 0)) is None  # never trained


def test_art_show_prints_a_group_with_advantages(
    trained_record: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as done:
        main(["show", str(trained_record), "--step", "2", "--group", "1", "--tokens"])
    out = capsys.readouterr().out
    assert done.value.code == 0, out
    storage = storage_of(trained_record)
    group = storage.read_groups("train", 2)[1]
    advantages = group_advantages([t.reward for t in group.trajectories])
    assert "train step 2 · group 1 of 2 (4 trajectories) · trainer: updated" in out
    for i, a in enumerate(advantages):
        assert f"#{i}  reward {group.trajectories[i].reward:.4f}  advantage {a:+.4f}  (trained)" in out
    assert "-> lookup(" in out and "[tool lookup call_1]" in out and "judge: answered" in out
    assert "token                 sampled   trainer   ratio     trained" in out


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--step", "7"], "has no train trajectories at step 7 (steps with some: 1, 2"),
        (["--step", "1", "--group", "5"], "--group: step 1 of train has 2 group(s); pass 0..1"),
        (["--step", "0", "--split", "nope"], "splits: train, val"),
    ],
)
def test_art_show_says_what_the_record_has(
    trained_record: Path, args: list[str], says: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as done:
        main(["show", str(trained_record), *args])
    assert done.value.code == 2 and says in capsys.readouterr().err


def test_art_show_on_a_folder_that_is_not_a_record(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as done:
        main(["show", str(tmp_path), "--step", "1"])
    assert done.value.code == 2 and "is not an ART record" in capsys.readouterr().err


def test_the_model_pages_default_charts_are_metrics_a_real_run_writes(trained_record: Path) -> None:
    """Every default chart and trainer phase names a metric the history of a real run holds (the training
    metrics were renamed once to the reference's `loss/train`, `loss/entropy`, ... and the page kept asking
    for `loss` and `entropy`), and the page draws the first four."""
    pytest.importorskip("fastapi", reason="needs the `local` extra: pip install -e '.[local]'")
    from fastapi.testclient import TestClient

    from art.record.plots import logged_metrics
    from art.ui.app import DEFAULT_CHARTS, TIMING_KEYS, create_app
    from art.ui.record import split_of

    storage = storage_of(trained_record)
    keys = logged_metrics(storage.read_history())
    short_names = {split_of(k, ["train", "val"])[1] for k in keys}
    assert [n for n in DEFAULT_CHARTS if n not in short_names] == [], sorted(short_names)
    assert [k for k in TIMING_KEYS if f"train/{k}" not in keys] == [], keys
    page = TestClient(create_app(storage.base_path)).get(f"/m/{storage.project}/{storage.name}")
    assert page.status_code == 200
    captions = re.findall(r"<figcaption>([^<]*?) <small>", page.text)
    assert captions == [*DEFAULT_CHARTS[:4], "wall time per step (s)", "trainer phases (s)"], captions
    wall_chart = page.text[page.text.index("wall time per step") :].split("</figure>")[0]
    assert "time/step_wall_s" in wall_chart and "time/cum/" not in wall_chart  # per step, no running totals
