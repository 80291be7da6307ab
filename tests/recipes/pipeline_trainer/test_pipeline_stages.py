"""PipelineTrainer against a test-double backend: stages, policy versions, stale and equal-reward groups,
evaluation, checkpoint retention, resuming, stopping. (The real service: tests/compat/test_pipeline_trainer_local.py.)"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from helpers_backends import DelegatingBackend

import art
from art.pipeline_trainer import (
    AllRolloutsFailedError,
    CheckpointRetentionContext,
    PipelineTrainer,
    make_group_rollout_fn,
)

pytestmark = pytest.mark.filterwarnings("ignore:.*has no trainable turn")


def scenarios(n: int) -> list[dict[str, Any]]:
    return [
        {"index": i, "metadata": {"scenario_id": f"s{i}", "epoch": 0, "nested": {"no": 1}}} for i in range(n)
    ]


async def two_rewards(
    model: art.TrainableModel, scenario: dict[str, Any], config: Any
) -> art.TrajectoryGroup:
    """A group whose rewards differ; each trajectory records the name its requests would have sent."""
    first = model.get_inference_name()
    await asyncio.sleep(0.01)  # other rollouts finish and steps train meanwhile
    last = model.get_inference_name()  # a later request of the same rollout
    name = first if first == last else f"{first} then {last}"
    return art.TrajectoryGroup(
        art.Trajectory(reward=float(r), metadata={"name": name, "index": scenario["index"]}) for r in (0, 1)
    )


async def registered(tmp_path: Path, backend: Any, name: str = "pipe") -> art.TrainableModel:
    model = art.TrainableModel(name=name, project="p", base_model="tiny", base_path=str(tmp_path))
    await model.register(backend)
    return model


def trained_groups(backend: Any) -> list[list[art.TrajectoryGroup]]:
    return [call["groups"] for call in backend.train_calls]


async def test_trains_until_the_scenarios_run_out_with_versions_pins_and_a_record(
    tmp_path: Path, fake_backend
) -> None:  # type: ignore[no-untyped-def]
    model = await registered(tmp_path, fake_backend)
    trainer = PipelineTrainer(
        model, fake_backend, two_rewards, scenarios(12), None, num_rollout_workers=2, min_batch_size=2,
        max_batch_size=2, max_steps_off_policy=1, learning_rate=3e-5, show_progress=False,
    )  # fmt: skip
    await trainer.train(handle_signals=False)

    batches = trained_groups(fake_backend)
    assert len(batches) == 6 and await model.get_step() == 6
    assert fake_backend.train_calls[0]["spec"].learning_rate == 3e-5
    for step, batch in enumerate(batches, start=1):
        for group in batch:
            versions = {t.initial_policy_version for t in group.trajectories}
            (version,) = versions
            assert step - 1 - 1 <= version <= step - 1  # at most max_steps_off_policy behind
            # every request of the rollout named the step it began on, not the newest one
            assert {t.metadata["name"] for t in group.trajectories} == {f"pipe@{version}"}
            assert all(
                t.final_policy_version is not None and t.final_policy_version >= version
                for t in group.trajectories
            )
            # a scenario's scalar metadata is copied to its group; nested values are not
            assert group.metadata["scenario_id"] == f"s{group.trajectories[0].metadata['index']}"
            assert group.metadata["scenario_epoch"] == 0 and "scenario_nested" not in group.metadata
    assert sorted(t.metadata["index"] for b in batches for g in b for t in g.trajectories[:1]) == list(
        range(12)
    )

    train_rows = [r for r in model.history() if "train/reward" in r]
    assert [r["step"] for r in train_rows] == [1, 2, 3, 4, 5, 6]
    assert all(0.0 <= r["train/steps_off_policy"] <= 1.0 and r["loss/train"] == 0.5 for r in train_rows)
    assert all("time/step_wall_s" in r and "time/step_trainer_s" in r for r in train_rows)
    saved_rows = [r for r in model.history() if "checkpoint/saved" in r]
    assert [r["step"] for r in saved_rows] == [1, 2, 3, 4, 5, 6]
    logged = model.storage.read_groups("train", 3)
    assert logged and logged[0].trajectories[0].initial_policy_version is not None  # kept on disk

    state = model.read_state()["_pipeline_trainer"]  # type: ignore[index]
    assert state["scenario_offset"] == 12 and state["training_step"] == 6


async def test_a_rollout_that_spans_a_published_step_keeps_naming_its_own_step(
    tmp_path: Path, fake_backend
) -> None:  # type: ignore[no-untyped-def]
    model = await registered(tmp_path, fake_backend)

    async def staggered(
        model: art.TrainableModel, scenario: dict[str, Any], config: Any
    ) -> art.TrajectoryGroup:
        await asyncio.sleep(0.05 * (scenario["index"] % 2))  # odd scenarios still run while even ones train
        return await two_rewards(model, scenario, config)

    trainer = PipelineTrainer(
        model, fake_backend, staggered, scenarios(8), None, num_rollout_workers=2, min_batch_size=1,
        max_batch_size=1, max_steps_off_policy=3, show_progress=False,
    )  # fmt: skip
    await trainer.train(handle_signals=False)
    trajectories = [t for b in trained_groups(fake_backend) for g in b for t in g.trajectories]
    spanned = [t for t in trajectories if t.final_policy_version > t.initial_policy_version]  # type: ignore[operator]
    assert spanned  # steps were published while these rollouts ran ...
    for t in trajectories:  # ... and every request of a rollout still named the step it began on
        assert t.metadata["name"] == f"pipe@{t.initial_policy_version}"


async def test_max_steps_stops_and_a_new_run_resumes_after_the_scenarios_used(
    tmp_path: Path, fake_backend
) -> None:  # type: ignore[no-untyped-def]
    model = await registered(tmp_path, fake_backend)
    seen: list[int] = []

    async def rollout(
        model: art.TrainableModel, scenario: dict[str, Any], config: Any
    ) -> art.TrajectoryGroup:
        seen.append(scenario["index"])
        return await two_rewards(model, scenario, config)

    def trainer(max_steps: int) -> PipelineTrainer[dict[str, Any], None]:
        return PipelineTrainer(
            model, fake_backend, rollout, iter(scenarios(20)), None, num_rollout_workers=1, min_batch_size=1,
            max_batch_size=1, max_steps_off_policy=0, max_steps=max_steps, show_progress=False,
        )  # fmt: skip

    await trainer(3).train(handle_signals=False)
    assert await model.get_step() == 3
    first_run = list(seen)
    offset = model.read_state()["_pipeline_trainer"]["scenario_offset"]  # type: ignore[index]
    assert offset == len(first_run) >= 3

    seen.clear()
    await trainer(2).train(handle_signals=False)
    assert await model.get_step() == 5
    assert min(seen) == offset  # the scenarios of the first run are skipped, none twice
    assert [r["step"] for r in model.history() if "train/reward" in r] == [1, 2, 3, 4, 5]


class SlowTrainBackend(DelegatingBackend):
    """The test double, with a training step that takes a while (so rollouts finish during it)."""

    def __init__(self, inner: Any, seconds: float) -> None:
        super().__init__(inner)
        self.seconds = seconds

    async def train(self, model: Any, groups: Any, **kwargs: Any) -> Any:
        await asyncio.sleep(self.seconds)
        return await self.inner.train(model, groups, **kwargs)


async def test_groups_older_than_max_steps_off_policy_are_discarded_not_trained(
    tmp_path: Path, fake_backend
) -> None:  # type: ignore[no-untyped-def]
    backend = SlowTrainBackend(fake_backend, 0.3)
    model = await registered(tmp_path, backend)

    async def rollout(
        model: art.TrainableModel, scenario: dict[str, Any], config: Any
    ) -> art.TrajectoryGroup:
        await asyncio.sleep(0.1 * scenario["index"])  # scenario 0 first; 1 and 2 finish while step 1 trains
        return await two_rewards(model, scenario, config)

    trainer = PipelineTrainer(
        model, backend, rollout, scenarios(3), None, num_rollout_workers=3, min_batch_size=1, max_batch_size=1,
        max_steps_off_policy=0, show_progress=False,
    )  # fmt: skip
    await trainer.train(handle_signals=False)
    assert trainer.state.discarded_stale_groups == 2
    batches = trained_groups(fake_backend)
    assert len(batches) == 1 and batches[0][0].trajectories[0].metadata["index"] == 0
    assert [r["train/discarded_stale_groups"] for r in model.history() if "train/reward" in r] == [0.0]


async def test_groups_with_equal_rewards_never_train_and_too_many_stop_training(
    tmp_path: Path, fake_backend, capsys: pytest.CaptureFixture[str]
) -> None:  # type: ignore[no-untyped-def]
    model = await registered(tmp_path, fake_backend)

    async def same(model: art.TrainableModel, scenario: dict[str, Any], config: Any) -> art.TrajectoryGroup:
        return art.TrajectoryGroup([art.Trajectory(reward=1.0), art.Trajectory(reward=1.0)])

    trainer = PipelineTrainer(
        model, fake_backend, same, scenarios(50), None, num_rollout_workers=2, min_batch_size=2,
        discard_queue_multiplier=3, show_progress=False,
    )  # fmt: skip
    await trainer.train(handle_signals=False)
    assert trainer.collapsed and fake_backend.train_calls == []
    assert "model collapse suspected" in capsys.readouterr().out
    assert trainer.state.scenario_offset < 50  # it stopped taking scenarios


async def test_a_group_whose_rollouts_all_failed_stops_the_pipeline_with_the_cause(
    tmp_path: Path, fake_backend
) -> None:  # type: ignore[no-untyped-def]
    model = await registered(tmp_path, fake_backend)

    async def broken(model: art.TrainableModel, scenario: dict[str, Any], config: Any) -> art.Trajectory:
        raise ValueError("tool server unreachable")

    trainer = PipelineTrainer(
        model, fake_backend, make_group_rollout_fn(broken, n=3), scenarios(5), None, num_rollout_workers=1,
        min_batch_size=1, show_progress=False,
    )  # fmt: skip
    with pytest.raises(
        AllRolloutsFailedError, match=r"all 3 rollouts .*scenario_id='s0'.*ValueError: tool server"
    ):
        await trainer.train(handle_signals=False)


async def test_make_group_rollout_fn_keeps_failed_rollouts_as_exceptions(
    tmp_path: Path, fake_backend
) -> None:  # type: ignore[no-untyped-def]
    model = await registered(tmp_path, fake_backend)
    calls = 0

    async def sometimes(model: art.TrainableModel, scenario: dict[str, Any], config: Any) -> art.Trajectory:
        nonlocal calls
        calls += 1
        if calls == 2:
            raise KeyError("missing")
        return art.Trajectory(reward=float(calls))

    group = await make_group_rollout_fn(sometimes, n=3)(model, {"index": 0}, None)
    assert len(group.trajectories) == 2 and [e.type for e in group.exceptions] == ["KeyError"]
    with pytest.raises(ValueError, match="n must be >= 0"):
        make_group_rollout_fn(sometimes, n=-1)


async def test_a_rollout_that_raises_or_returns_the_wrong_type_is_reported_and_skipped(
    tmp_path: Path, fake_backend, capsys: pytest.CaptureFixture[str]
) -> None:  # type: ignore[no-untyped-def]
    model = await registered(tmp_path, fake_backend)

    async def flaky(model: art.TrainableModel, scenario: dict[str, Any], config: Any) -> Any:
        if scenario["index"] == 1:
            raise ConnectionError("judge timed out")
        if scenario["index"] == 2:
            return art.Trajectory(reward=1.0)  # not a group
        return await two_rewards(model, scenario, config)

    trainer = PipelineTrainer(
        model, fake_backend, flaky, scenarios(4), None, num_rollout_workers=1, min_batch_size=1,
        max_batch_size=1, show_progress=False,
    )  # fmt: skip
    await trainer.train(handle_signals=False)
    out = capsys.readouterr().out
    assert "rollout failed [scenario_id='s1' epoch=0]: ConnectionError: judge timed out" in out
    assert "rollout_fn must return an art.TrajectoryGroup, got Trajectory" in out
    assert len(fake_backend.train_calls) == 2  # scenarios 0 and 3
    assert trainer._status.errors == 2


async def test_evaluations_run_at_the_start_and_every_n_steps_on_their_own_step(
    tmp_path: Path, fake_backend
) -> None:  # type: ignore[no-untyped-def]
    model = await registered(tmp_path, fake_backend)
    evaluated: list[tuple[int, str]] = []

    async def evaluate(
        model: art.TrainableModel, step: int, config: Any
    ) -> list[art.Trajectory | art.TrajectoryGroup]:
        evaluated.append((step, model.get_inference_name()))
        return [art.Trajectory(reward=step / 10), art.TrajectoryGroup([art.Trajectory(reward=step / 10)])]

    trainer = PipelineTrainer(
        model, fake_backend, two_rewards, scenarios(30), "cfg", evaluate, num_rollout_workers=1,
        min_batch_size=1, max_batch_size=1, max_steps=4, eval_every_n_steps=2, show_progress=False,
    )  # fmt: skip
    await trainer.train(handle_signals=False)
    assert evaluated == [(0, "pipe@0"), (2, "pipe@2"), (4, "pipe@4")]
    val = {r["step"]: r["val/reward"] for r in model.history() if "val/reward" in r}
    assert val == {0: 0.0, 2: 0.2, 4: 0.4}
    done = [r["step"] for r in model.history() if "checkpoint/eval_completed" in r]
    assert done == [0, 2, 4]
    assert model.read_state()["_pipeline_trainer"]["completed_eval_steps"] == [0, 2, 4]  # type: ignore[index]


async def test_judge_costs_of_rollouts_and_evaluations_land_in_train_and_val_rows(
    tmp_path: Path, fake_backend
) -> None:  # type: ignore[no-untyped-def]
    from art.metrics import MetricsBuilder, track_api_cost

    model = await registered(tmp_path, fake_backend)
    contexts: list[str] = []

    @track_api_cost(
        source="llm_judge", provider="openai", model_name="openai/gpt-4.1", prompt_price_per_million=1.0
    )
    async def judge() -> dict[str, Any]:
        contexts.append(MetricsBuilder.get_active().cost_context)
        return {"usage": {"prompt_tokens": 1_000_000, "completion_tokens": 0}}  # $1

    async def rollout(
        model: art.TrainableModel, scenario: dict[str, Any], config: Any
    ) -> art.TrajectoryGroup:
        await judge()
        return await two_rewards(model, scenario, config)

    async def evaluate(model: art.TrainableModel, step: int, config: Any) -> list[art.Trajectory]:
        await judge()
        return [art.Trajectory(reward=1.0)]

    trainer = PipelineTrainer(
        model, fake_backend, rollout, scenarios(2), None, evaluate, num_rollout_workers=1, min_batch_size=1,
        max_batch_size=1, max_steps_off_policy=0, eval_every_n_steps=0, show_progress=False,
    )  # fmt: skip
    await trainer.train(handle_signals=False)

    assert sorted(contexts) == ["eval", "train", "train"]
    rows = model.history()
    train_costs = [r["costs/train/llm_judge"] for r in rows if "costs/train/llm_judge" in r]
    # each rollout's $1 in a train row (which row may depend on timing: the next one logged)
    assert sum(train_costs) == 2.0 and all("train/reward" in r for r in rows if "costs/train" in r)
    (val_row,) = [r for r in rows if "val/reward" in r]
    assert val_row["costs/eval/llm_judge"] == 1.0 and "time/step_eval_s" in val_row
    assert max(r.get("costs/cum/all", 0.0) for r in rows) == 3.0


async def test_an_evaluation_that_fails_is_reported_and_training_goes_on(
    tmp_path: Path, fake_backend, capsys: pytest.CaptureFixture[str]
) -> None:  # type: ignore[no-untyped-def]
    model = await registered(tmp_path, fake_backend)

    async def evaluate(model: art.TrainableModel, step: int, config: Any) -> list[art.Trajectory]:
        raise RuntimeError("eval set missing")

    trainer = PipelineTrainer(
        model, fake_backend, two_rewards, scenarios(3), None, evaluate, num_rollout_workers=1, min_batch_size=1,
        max_batch_size=1, show_progress=False,
    )  # fmt: skip
    await trainer.train(handle_signals=False)
    assert "evaluation of step 0 failed: RuntimeError: eval set missing" in capsys.readouterr().out
    assert await model.get_step() == 3


async def test_retention_deletes_what_the_strategy_drops_but_never_the_newest_step(
    tmp_path: Path, fake_backend
) -> None:  # type: ignore[no-untyped-def]
    model = await registered(tmp_path, fake_backend)
    contexts: list[CheckpointRetentionContext] = []

    def keep_even(context: CheckpointRetentionContext) -> list[int]:
        contexts.append(context)
        return [c.step for c in context.checkpoints if c.step % 2 == 0]

    trainer = PipelineTrainer(
        model, fake_backend, two_rewards, scenarios(5), None, num_rollout_workers=1, min_batch_size=1,
        max_batch_size=1, max_steps_off_policy=0, checkpoint_retention_strategy=keep_even, show_progress=False,
    )  # fmt: skip
    await trainer.train(handle_signals=False)
    assert model.storage.checkpoint_steps() == [0, 2, 4, 5]
    assert all(c.step != ctx.current_step for ctx in contexts for c in ctx.checkpoints)  # never offered
    assert any(c.metrics.get("checkpoint/saved") == 1.0 for ctx in contexts for c in ctx.checkpoints)


async def test_request_stop_finishes_the_step_and_saves_the_position(tmp_path: Path, fake_backend) -> None:  # type: ignore[no-untyped-def]
    model = await registered(tmp_path, fake_backend)
    trainer: PipelineTrainer[dict[str, Any], None]

    async def rollout(
        model: art.TrainableModel, scenario: dict[str, Any], config: Any
    ) -> art.TrajectoryGroup:
        if scenario["index"] == 3:
            trainer.request_stop()
        return await two_rewards(model, scenario, config)

    trainer = PipelineTrainer(
        model, fake_backend, rollout, scenarios(100), None, num_rollout_workers=1, min_batch_size=1,
        max_batch_size=1, max_steps_off_policy=0, show_progress=False,
    )  # fmt: skip
    await asyncio.wait_for(trainer.train(handle_signals=False), timeout=30)
    assert 3 <= await model.get_step() <= 4
    assert model.read_state()["_pipeline_trainer"]["scenario_offset"] == 4  # type: ignore[index]


@pytest.mark.parametrize(
    ("kwargs", "problem"),
    [
        ({"num_rollout_workers": 0}, "num_rollout_workers must be > 0, got 0"),
        (
            {"min_batch_size": 4, "max_batch_size": 2},
            r"max_batch_size must be >= min_batch_size \(4\), got 2",
        ),
        ({"max_steps_off_policy": -1}, "max_steps_off_policy must be >= 0"),
        ({"save_checkpoint": False}, "save_checkpoint=False is not supported here: every step is saved"),
        ({"loss_fn": "grpo"}, "loss_fn must be 'cispo' or 'ppo', got 'grpo'"),
        ({"adam_params": {"lr": 1}}, "adam_params must be None"),
        ({"kl_penalty_step_lag": 0}, "kl_penalty_step_lag must be >= 1"),
    ],
)
async def test_bad_settings_are_refused_by_name(
    tmp_path: Path, fake_backend, kwargs: dict[str, Any], problem: str
) -> None:  # type: ignore[no-untyped-def]
    model = await registered(tmp_path, fake_backend)
    with pytest.raises(ValueError, match=f"PipelineTrainer: {problem}"):
        PipelineTrainer(model, fake_backend, two_rewards, [], None, **kwargs)


async def test_the_status_line_counts_what_happened(tmp_path: Path, fake_backend) -> None:  # type: ignore[no-untyped-def]
    model = await registered(tmp_path, fake_backend)
    trainer = PipelineTrainer(
        model, fake_backend, two_rewards, scenarios(4), None, num_rollout_workers=1, min_batch_size=1,
        max_batch_size=1, total_scenarios=4, show_progress=False,
    )  # fmt: skip
    await trainer.train(handle_signals=False)
    line = trainer._status.status_line()
    assert line.startswith("[status] scenarios[done=4/4 in_flight=0/1")
    assert "train[step=4 reward=0.500" in line and "val[step=n/a" in line
    assert json.loads(model.storage.state_path.read_text())["_pipeline_trainer"]["training_step"] == 4
