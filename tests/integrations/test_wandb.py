"""W&B reporting: every history row reaches an offline run, on the training_step axis, with tables."""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import pytest
from helpers_choices import make_choice
from wandb_reader import read_offline_run

import art
from art import integrations
from art.integrations import wandb as wandb_hook

pytest.importorskip("wandb", reason="needs the `wandb` extra: pip install -e '.[wandb]'")


def group(question: str, rewards: list[float]) -> art.TrajectoryGroup:
    return art.TrajectoryGroup(
        art.Trajectory(
            messages_and_choices=[{"role": "user", "content": question}, make_choice(f"answer {r}")],
            reward=r,
            metrics={"correct": r > 0.5},
            metadata={"question": question},
        )
        for r in rewards
    )


def finish(model: art.Model) -> None:
    """Finish the model's run and wait until wandb's service has closed the run file."""
    import wandb

    wandb_hook.finish(model)
    wandb.teardown()


async def test_every_logged_row_reaches_an_offline_run_on_the_training_step_axis(
    offline: Path, tmp_path: Path, fake_backend
) -> None:  # type: ignore[no-untyped-def]
    model = art.TrainableModel(
        name="agent-007",
        project="wandb-test",
        base_model="tiny",
        base_path=str(tmp_path / "art"),
        report_metrics=["wandb"],
    )
    await model.register(fake_backend)
    await model.train([group("2+2?", [1.0, 0.0]), group("3+3?", [0.25, 0.75])])  # step 1
    await model.train([group("4+4?", [1.0, 0.5])])  # step 2
    await model.log([group("held out", [1.0, 1.0, 0.0])], split="val", step=1)  # late eval of step 1
    finish(model)

    (run_dir,) = offline.glob("offline-run-*")
    run = read_offline_run(run_dir)
    stored = json.loads(model.storage.trackers_path.read_text())["wandb"]["run_id"]  # kept in the record
    assert stored.startswith("agent-007-")
    assert (run.run_id, run.project, run.display_name) == (stored, "wandb-test", "agent-007")
    for section in ("train/*", "val/*", "loss/*", "data/*", "time/*", "throughput/*", "reward/*"):
        assert run.step_metrics[section] == "training_step", section

    history = model.history()
    assert len(run.history) == len(history) == 3
    for logged, row in zip(run.history, history, strict=True):
        assert logged["training_step"] == row["step"]
        assert logged["time/wall_clock_sec"] >= 0
    train1, train2, val1 = run.history
    assert [train1["training_step"], train2["training_step"], val1["training_step"]] == [1, 2, 1]
    # The reference's names: loss in its own section, rewards under the split.
    assert train1["loss/train"] == history[0]["loss/train"] == 0.5
    assert train1["train/reward"] == history[0]["train/reward"] == 0.5
    assert train1["train/reward_std_dev"] == history[0]["train/reward_std_dev"] == pytest.approx(0.375)
    assert train1["data/step_num_trajectories"] == 4
    assert train1["data/step_num_groups_submitted"] == train1["data/step_num_groups_trainable"] == 2
    assert val1["data/step_num_scenarios"] == 1 and "data/step_num_groups_trainable" not in val1
    assert train1["train/correct"] == 0.5
    assert val1["val/reward"] == pytest.approx(2 / 3)
    assert "train/loss" not in train1

    # Trajectories as a table per step, readable from the run's files.
    assert train1["train/trajectories/_type"] == "table-file"
    table = json.loads((run_dir / "files" / train1["train/trajectories/path"]).read_text())
    assert table["columns"] == wandb_hook.TABLE_COLUMNS
    assert len(table["data"]) == 4
    first = dict(zip(table["columns"], table["data"][0], strict=True))
    assert first["training_step"] == 1 and first["group"] == 0 and first["reward"] == 1.0
    assert json.loads(first["metadata"]) == {"question": "2+2?"}
    assert first["conversation"] == "[user] 2+2?\n\n[assistant] answer 1.0"
    val_table = json.loads((run_dir / "files" / val1["val/trajectories/path"]).read_text())
    assert len(val_table["data"]) == 3


async def test_a_resumed_model_continues_its_run_and_a_new_record_starts_another(
    offline: Path, tmp_path: Path
) -> None:
    def model(base: Path) -> art.Model:
        return art.Model(name="agent-9", project="wandb-test", base_path=str(base), report_metrics=["wandb"])

    first = model(tmp_path / "art")
    await first.log(metrics={"accuracy": 0.1}, split="val", step=1)
    await first.log(metrics={"accuracy": 0.2}, split="val", step=2)
    finish(first)  # the script ends
    resumed = model(tmp_path / "art")  # ... and starts again on the same record
    await resumed.log(metrics={"accuracy": 0.3}, split="val", step=3)
    finish(resumed)

    stored = json.loads(first.storage.trackers_path.read_text())["wandb"]["run_id"]
    runs = [read_offline_run(d) for d in sorted(offline.glob("offline-run-*"))]
    # Offline, each process writes its own segment; both belong to the record's run, and W&B's steps
    # continue across them (a second segment starting again at 0 would overwrite the first on sync).
    assert [r.run_id for r in runs] == [stored, stored]
    assert [row["_step"] for r in runs for row in r.history] == [0, 1, 2]
    assert [row["val/accuracy"] for r in runs for row in r.history] == [0.1, 0.2, 0.3]

    fresh = model(tmp_path / "elsewhere")  # a new record under the same name: a new run
    await fresh.log(metrics={"accuracy": 0.5}, split="val", step=1)
    finish(fresh)
    (newest,) = set(offline.glob("offline-run-*")) - {r.run_dir for r in runs}
    assert read_offline_run(newest).run_id not in ("", stored)


async def test_a_record_logged_before_run_ids_were_kept_continues_the_run_named_after_the_model(
    offline: Path, tmp_path: Path
) -> None:
    old = art.Model(name="legacy", project="wandb-test", base_path=str(tmp_path / "art"), report_metrics=[])
    await old.log(metrics={"accuracy": 0.1}, split="val", step=1)  # logged by an earlier version
    resumed = art.Model(
        name="legacy", project="wandb-test", base_path=str(tmp_path / "art"), report_metrics=["wandb"]
    )
    await resumed.log(metrics={"accuracy": 0.2}, split="val", step=2)
    finish(resumed)
    (run_dir,) = offline.glob("offline-run-*")
    run = read_offline_run(run_dir)
    assert run.run_id == "legacy" and [row["_step"] for row in run.history] == [1]


async def test_metrics_only_rows_are_reported_without_a_table(offline: Path, tmp_path: Path) -> None:
    model = art.Model(
        name="prompted", project="wandb-test", base_path=str(tmp_path / "art"), report_metrics=["wandb"]
    )
    await model.log(metrics={"accuracy": 0.9, "costs/judge": 0.01}, split="val", step=0)
    finish(model)
    (run_dir,) = offline.glob("offline-run-*")
    (row,) = read_offline_run(run_dir).history
    assert row["val/accuracy"] == 0.9 and row["costs/judge"] == 0.01 and row["training_step"] == 0
    assert not any(key.endswith("/_type") for key in row)


async def test_update_wandb_config_reaches_the_run_before_and_after_it_starts(
    offline: Path, tmp_path: Path
) -> None:
    model = art.Model(
        name="cfg", project="wandb-test", base_path=str(tmp_path / "art"), report_metrics=["wandb"]
    )
    model.update_wandb_config({"dataset": "inbox-v1", "rollout": {"max_turns": 10}})  # before the run exists
    await model.log(metrics={"accuracy": 0.5}, split="val", step=0)  # starts the run
    model.update_wandb_config({"rollout": {"temperature": 0.7}})  # the open run gets it now
    with pytest.raises(ValueError, match="'dataset' is 'inbox-v1', not 'inbox-v2'"):
        model.update_wandb_config({"dataset": "inbox-v2"})  # set once, as in the reference
    assert model.wandb_config == {"dataset": "inbox-v1", "rollout": {"max_turns": 10, "temperature": 0.7}}
    finish(model)
    (run_dir,) = offline.glob("offline-run-*")
    config = read_offline_run(run_dir).config
    # the user's config only, as the reference
    assert config["dataset"] == "inbox-v1" and "trainable" not in config
    assert config["rollout"] == {"max_turns": 10, "temperature": 0.7}


def test_wandb_is_on_by_default_only_with_an_api_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("WANDB_API_KEY", raising=False)
    assert integrations.active_trackers(None) == []
    monkeypatch.setenv("WANDB_API_KEY", "local-test-key")
    assert integrations.active_trackers(None) == ["wandb"]
    assert integrations.active_trackers([]) == []  # an explicit empty list turns it off


def test_a_key_without_wandb_installed_warns_once_and_reports_nothing(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("WANDB_API_KEY", "local-test-key")
    monkeypatch.setitem(integrations.PACKAGES, "wandb", "wandb_is_not_installed_here")
    monkeypatch.setattr(integrations, "_warned_default", False)
    with pytest.warns(UserWarning, match=r"pip install 'agent-reinforcement-trainer\[wandb\]'"):
        assert integrations.active_trackers(None) == []
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert integrations.active_trackers(None) == []


def test_asking_for_wandb_without_it_installed_gives_the_install_command(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setitem(integrations.PACKAGES, "wandb", "wandb_is_not_installed_here")
    with pytest.raises(
        ValueError, match=r"report_metrics[\s\S]*pip install 'agent-reinforcement-trainer\[wandb\]'"
    ):
        art.Model(name="m", project="p", base_path=str(tmp_path), report_metrics=["wandb"])
    with pytest.warns(UserWarning, match="no tracker named 'tensorboard'.*kept and ignored"):
        kept = art.Model(name="m", project="p", base_path=str(tmp_path), report_metrics=["tensorboard"])
    assert kept.report_metrics == ["tensorboard"]  # as the reference keeps any name


async def test_rows_are_logged_as_the_reference_logs_them_unless_wandbs_step_is_behind(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`run.log(row)` with no keyword, as the reference calls it (its unit test checks so), while W&B's own
    counter matches the history; an explicit step only where it is behind (a resumed offline segment)."""
    import sys
    import types

    class FakeRun:
        def __init__(self) -> None:
            self.step = 0  # W&B's counter: a new segment starts at 0
            self.calls: list[dict[str, object]] = []
            self.config = types.SimpleNamespace(update=lambda *a, **k: None)

        def define_metric(self, *args: object, **kwargs: object) -> None:
            pass

        def log(self, row: dict[str, object], **kwargs: object) -> None:
            self.calls.append(kwargs)
            step = kwargs.get("step", self.step)
            assert isinstance(step, int)
            self.step = step + 1

        def finish(self) -> None:
            self._is_finished = True

    runs: list[FakeRun] = []

    def init(**kwargs: object) -> FakeRun:
        runs.append(FakeRun())
        return runs[-1]

    fake = types.SimpleNamespace(init=init, Table=lambda **k: None, Settings=lambda **k: k)
    monkeypatch.setitem(sys.modules, "wandb", fake)

    def model() -> art.Model:
        return art.Model(name="calls", project="p", base_path=str(tmp_path / "art"), report_metrics=["wandb"])

    first = model()
    await first.log(metrics={"accuracy": 0.1}, split="val", step=1)
    await first.log(metrics={"accuracy": 0.2}, split="val", step=2)
    assert runs[0].calls == [{}, {}]
    runs[0].finish()  # the script ends; the next process opens a new segment, its counter at 0
    resumed = model()
    await resumed.log(metrics={"accuracy": 0.3}, split="val", step=3)
    await resumed.log(metrics={"accuracy": 0.4}, split="val", step=4)
    assert runs[1].calls == [{"step": 2}, {}]
