"""`Model.metrics_builder` and friends as a user meets them: what `model.log` writes in history.jsonl, what
state.json keeps across a restart, and the costs of the model's own completions (`set_cost_calculator`)."""

from __future__ import annotations

import asyncio
import copy
import json
import pickle
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import openai
import pytest
from helpers_backends import DelegatingBackend

import art
from art.costs import ModelPricing, build_cost_calculator
from art.metrics import MetricsBuilder, track_api_cost


def trainable(tmp_path: Path, **kwargs: Any) -> art.TrainableModel:
    return art.TrainableModel(
        name="agent", project="proj", base_model="tiny", base_path=str(tmp_path), **kwargs
    )


def groups() -> list[art.TrajectoryGroup]:
    return [art.TrajectoryGroup(art.Trajectory(reward=r) for r in (0.0, 1.0))]


@track_api_cost(
    source="llm_judge/correctness",
    provider="openai",
    model_name="openai/judge",
    prompt_price_per_million=1.0,
    completion_price_per_million=2.0,
)
async def judge(prompt_tokens: int, completion_tokens: int) -> dict[str, Any]:
    return {"usage": {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens}}


async def test_a_logged_row_holds_the_contexts_costs_rollups_and_totals(tmp_path: Path, fake_backend) -> None:  # type: ignore[no-untyped-def]
    model = trainable(tmp_path)
    await model.register(fake_backend)

    with model.metrics_builder("train").activate_context():
        await judge(1_000_000, 0)  # $1
        await judge(0, 1_000_000)  # $2
    with model.metrics_builder("eval").activate_context():
        await judge(500_000, 0)  # $0.5, for the next "val" row, not the train row
    await model.log(groups(), split="train", step=1, metrics={"loss": 0.25})
    await model.log(groups(), split="val", step=1)

    train_row, val_row = model.history()
    assert train_row["train/reward"] == 0.5 and train_row["train/loss"] == 0.25  # our keys, as before
    assert train_row["costs/train/llm_judge/correctness"] == pytest.approx(3.0)
    assert train_row["costs/train/llm_judge"] == pytest.approx(3.0)
    assert train_row["costs/train"] == pytest.approx(3.0) and train_row["costs/all"] == pytest.approx(3.0)
    assert not any(key.startswith("costs/eval") for key in train_row)
    assert val_row["val/reward"] == 0.5
    assert val_row["costs/eval/llm_judge/correctness"] == pytest.approx(0.5)
    assert val_row["costs/all"] == pytest.approx(0.5) and val_row["costs/cum/all"] == pytest.approx(3.5)


async def test_activate_metrics_context_returns_a_token_that_restores_the_previous_one(
    tmp_path: Path,
) -> None:
    model = trainable(tmp_path)
    token = model.activate_metrics_context("eval")
    try:
        assert MetricsBuilder.get_active().cost_context == "eval"
        await judge(1_000_000, 0)
    finally:
        token.var.reset(token)
    with pytest.raises(LookupError):
        MetricsBuilder.get_active()
    await model.log(None, split="test", step=0)  # "val" and "test" rows both take the eval costs
    assert model.history()[0]["costs/eval"] == pytest.approx(1.0)


async def test_totals_go_on_in_a_new_model_object_after_a_restart(tmp_path: Path, fake_backend) -> None:  # type: ignore[no-untyped-def]
    first = trainable(tmp_path)
    await first.register(fake_backend)
    first.merge_state({"dataset_offset": 7})
    first.metrics_builder().add_data(scenario_ids=["a", "b"])
    first.metrics_builder().add_cost("train/gpu", usd=1.5)
    await first.log(groups(), split="train", step=1)

    restarted = trainable(tmp_path)  # e.g. the next run of the script
    await restarted.register(type(fake_backend)())
    restarted.metrics_builder().add_cost("train/gpu", usd=2.0)
    restarted.metrics_builder().add_data(scenario_ids=["b", "c"])
    await restarted.log(groups(), split="train", step=2)

    row = restarted.history()[-1]
    assert row["costs/train/gpu"] == pytest.approx(2.0)
    assert row["costs/cum/train/gpu"] == pytest.approx(3.5) and row["costs/cum/all"] == pytest.approx(3.5)
    assert row["data/cum/num_unique_scenarios"] == 3
    state = json.loads((restarted.storage.root / "state.json").read_text())
    assert state["dataset_offset"] == 7  # the user's own state is kept
    assert state["_metrics_builder_state"]["cum_state"]["costs/cum/all"] == pytest.approx(3.5)
    assert state["_metrics_builder_state"]["unique_scenario_ids"] == ["a", "b", "c"]


async def test_a_model_still_copies_and_pickles_and_a_copy_keeps_its_totals(tmp_path: Path) -> None:
    model = trainable(tmp_path)
    model.metrics_builder().add_cost("train/gpu", usd=1.0)
    await model.log(None, split="train", step=1)
    for copied in (copy.deepcopy(model), pickle.loads(pickle.dumps(model))):
        copied.metrics_builder().add_cost("train/gpu", usd=2.0)
        assert (await copied.metrics_builder().flush())["costs/cum/all"] == 3.0
    assert model.metrics_builder().state_dict()["cum_state"]["costs/cum/all"] == 1.0  # the original's own


async def test_a_model_that_never_uses_the_builder_writes_no_state(tmp_path: Path) -> None:
    model = trainable(tmp_path)
    await model.log(None, split="val", step=0, metrics={"win": 1.0})
    await model.log(groups(), split="notes", step=0)  # not train/val/test: no automatic data metrics
    assert model.read_state() is None


def scenario_group(scenario: str, rewards: tuple[float, ...], exceptions: int = 0) -> art.TrajectoryGroup:
    group = art.TrajectoryGroup(
        (art.Trajectory(reward=r) for r in rewards),
        metadata={"scenario_id": scenario},
        exceptions=[RuntimeError("rollout failed") for _ in range(exceptions)],
    )
    return group


async def test_log_adds_the_reference_data_metrics_of_the_groups(tmp_path: Path) -> None:
    model = trainable(tmp_path)
    step_1 = [scenario_group("a", (0.0, 1.0)), scenario_group("b", (1.0, 1.0), exceptions=1)]
    await model.log(step_1, split="train", step=1)
    await model.log([scenario_group("a", (0.0, 0.5)), scenario_group("c", (1.0, 0.0))], split="val", step=1)
    step_2 = [scenario_group("b", (0.0, 1.0)), scenario_group("d", (0.0, 1.0))]
    await model.log(step_2, split="train", step=2, metrics={"data/step_num_scenarios": 7})
    train_1, val_1, train_2 = model.history()

    assert train_1["data/step_num_scenarios"] == 2
    assert train_1["data/step_num_trajectories"] == 5  # the failed rollout counts
    assert train_1["data/step_num_groups_submitted"] == 2
    assert train_1["data/step_num_groups_trainable"] == 1  # group "b" got equal rewards: nothing to learn
    assert "data/step_num_groups_trainable" not in val_1 and val_1["data/step_num_groups_submitted"] == 2
    assert train_2["data/step_num_scenarios"] == 7  # the caller's value, not the count
    assert train_2["data/step_num_groups_trainable"] == 2
    # distinct scenario ids over every row so far: a, b (step 1), c (val), d (step 2)
    assert train_1["data/cum/num_unique_scenarios"] == 2
    assert train_2["data/cum/num_unique_scenarios"] == 4
    assert train_2["data/cum/num_trajectories"] == 5 + 4 + 4
    # a restart keeps the totals
    again = trainable(tmp_path)
    await again.log([scenario_group("e", (0.0, 1.0))], split="train", step=3)
    assert again.history()[-1]["data/cum/num_unique_scenarios"] == 5


async def test_costs_in_trajectory_metrics_are_summed_and_group_metrics_averaged(tmp_path: Path) -> None:
    model = trainable(tmp_path)
    judged = [
        art.Trajectory(reward=r, metrics={"costs/train/llm_judge": 0.01, "turns": turns})
        for r, turns in ((0.0, 2), (1.0, 4))
    ]
    first = art.TrajectoryGroup(judged, metrics={"difficulty": 1.0, "costs/train/scenario_gen": 0.5})
    second = art.TrajectoryGroup([art.Trajectory(reward=0.5)], metrics={"difficulty": 3.0})
    empty = art.TrajectoryGroup([], metrics={"difficulty": 100.0}, exceptions=[RuntimeError("x")])
    await model.log([first, second, empty], split="train", step=1)
    (row,) = model.history()

    assert row["costs/train/llm_judge"] == pytest.approx(0.02)  # per trajectory, summed over the step
    assert row["costs/train/scenario_gen"] == pytest.approx(0.5)
    assert row["costs/train"] == pytest.approx(0.52) and row["costs/cum/all"] == pytest.approx(0.52)
    assert not any(key.startswith("train/costs") for key in row)  # not averaged as a trajectory metric
    assert row["train/turns"] == 3  # other trajectory metrics: the mean, as before
    assert row["train/group_difficulty"] == 2  # over the groups that have trajectories


class MeasuringBackend(DelegatingBackend):
    """A backend that, like `LocalBackend`, asks `model.log` to measure each step (and prices it)."""

    def __init__(self, inner: Any, hourly_usd: float | None) -> None:
        super().__init__(inner)
        self.hourly_usd = hourly_usd

    def supports_automatic_train_step_metrics(self) -> bool:
        return True

    def automatic_gpu_cost_per_hour_usd(self, model: art.Model) -> float | None:
        return self.hourly_usd


async def test_train_rows_get_the_step_wall_time_and_its_gpu_cost(tmp_path: Path, fake_backend) -> None:  # type: ignore[no-untyped-def]
    model = trainable(tmp_path)
    await model.register(MeasuringBackend(fake_backend, hourly_usd=3600.0))  # $1 per second
    await asyncio.sleep(0.2)
    await model.train(groups())  # logs step 1's "train" row
    await model.log(groups(), split="val", step=1)  # not a train row: not measured
    await model.log(groups(), split="train", step=1, metrics={"extra": 1.0})  # step 1 again: measured once
    await asyncio.sleep(0.1)
    await model.log(groups(), split="train", step=2, metrics={"time/step_wall_s": 9.0})
    train_1, val_1, again_1, train_2 = model.history()

    assert 0.2 <= train_1["time/step_wall_s"] < 5
    assert train_1["costs/gpu"] == pytest.approx(train_1["time/step_wall_s"])
    for row in (val_1, again_1):
        assert "time/step_wall_s" not in row and "costs/gpu" not in row
    assert train_2["time/step_wall_s"] == 9.0  # the caller's
    assert 0.1 <= train_2["costs/gpu"] < 5  # the measured wall time, priced
    assert train_2["time/cum/wall_s"] == pytest.approx(train_1["time/step_wall_s"] + 9.0)

    unpriced = trainable(tmp_path / "unpriced")
    await unpriced.register(MeasuringBackend(fake_backend, hourly_usd=None))
    await unpriced.log(groups(), split="train", step=1)
    (row,) = unpriced.history()
    assert "time/step_wall_s" in row and "costs/gpu" not in row


async def test_step_keys_passed_to_log_get_totals_and_throughput(tmp_path: Path) -> None:
    model = trainable(tmp_path)
    for step in (1, 2):
        await model.log(
            None,
            split="train",
            step=step,
            metrics={"loss": 0.5, "time/step_trainer_s": 2.0, "data/step_trainer_tokens": 100.0 * step},
        )

    first, second = model.history()
    assert first["train/loss"] == 0.5 and first["time/step_trainer_s"] == 2.0
    assert first["data/step_trainer_tokens"] == 100.0 and first["throughput/avg_trainer_tok_per_s"] == 50.0
    assert second["time/cum/trainer_s"] == 4.0 and second["data/cum/trainer_tokens"] == 300.0
    assert second["throughput/avg_trainer_tok_per_s"] == pytest.approx(75.0)


async def test_measure_and_add_data_land_in_the_next_row_even_a_metrics_only_one(tmp_path: Path) -> None:
    model = trainable(tmp_path)
    builder = model.metrics_builder()
    with builder.measure("time/step_actor_s"):
        await asyncio.sleep(0.05)
    builder.add_data(step_num_scenarios=4, step_actor_tokens=1_000, scenario_ids=["s1", "s2"])
    builder.add_idle_times(step_actor_idle_s=0.5)

    await model.log(split="train", step=1)  # nothing else to log: the builder's step is the row

    (row,) = model.history()
    assert 0.05 <= row["time/step_actor_s"] < 5.0
    assert row["data/step_num_scenarios"] == 4 and row["data/cum/num_unique_scenarios"] == 2
    assert row["throughput/avg_actor_tok_per_s"] == pytest.approx(1_000 / row["time/step_actor_s"])
    assert row["throughput/cum/actor_idle_s"] == 0.5


async def test_a_refused_key_in_log_metrics_raises_before_anything_is_written(tmp_path: Path) -> None:
    model = trainable(tmp_path)
    with pytest.raises(ValueError, match="cumulative"):
        await model.log(groups(), split="train", step=1, metrics={"costs/cum/all": 1.0})
    assert model.history() == [] and model.storage.read_groups("train", 1) == []


async def test_register_moving_the_folder_keeps_what_is_pending_and_reads_that_folders_totals(
    tmp_path: Path, fake_backend
) -> None:  # type: ignore[no-untyped-def]
    records = tmp_path / "records"
    earlier = trainable(records)
    earlier.metrics_builder().add_cost("train/gpu", usd=1.0)
    await earlier.log(None, split="train", step=0)

    model = trainable(tmp_path / "elsewhere")  # before register: the builder reads an empty folder
    model.metrics_builder().add_cost("train/gpu", usd=2.0)
    fake_backend.path = str(
        records
    )  # a backend that keeps records in its own folder, as LocalBackend(path=...)
    with pytest.warns(UserWarning, match="replaced by the backend's path"):
        await model.register(fake_backend)
    await model.log(None, split="train", step=1)

    assert model.history()[-1]["costs/train/gpu"] == 2.0
    assert model.history()[-1]["costs/cum/all"] == pytest.approx(3.0)


# ---- the model's own completions: set_cost_calculator ---------------------------------------------
class _Completions(BaseHTTPRequestHandler):
    """An OpenAI-compatible /chat/completions that answers `n` choices with fixed usage."""

    def do_POST(self) -> None:
        request = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        n = int(request.get("n") or 1)
        body = json.dumps(
            {
                "id": "c1",
                "object": "chat.completion",
                "created": 0,
                "model": request["model"],
                "choices": [
                    {"index": i, "finish_reason": "stop", "message": {"role": "assistant", "content": "hi"}}
                    for i in range(n)
                ],
                "usage": {
                    "prompt_tokens": 1_000_000,
                    "completion_tokens": 2_000_000,
                    "total_tokens": 3_000_000,
                },
            }
        ).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture
def completions_url() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Completions)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    server.shutdown()
    server.server_close()


async def test_the_cost_calculator_prices_completions_through_openai_client_in_a_context(
    tmp_path: Path, completions_url: str
) -> None:
    model = trainable(tmp_path, inference_base_url=completions_url, inference_api_key="k")
    assert model.cost_calculator(1_000, 1_000, "train") == {}  # none by default
    model.set_cost_calculator(build_cost_calculator(ModelPricing(prefill=0.1, sample=0.3, train=0.3)))
    client = model.openai_client()
    assert isinstance(client, openai.AsyncOpenAI)  # still the plain client
    messages: list[Any] = [{"role": "user", "content": "hello"}]

    await client.chat.completions.create(model="agent", messages=messages)  # no context: not priced
    with model.metrics_builder("train").activate_context():
        response = await client.chat.completions.create(model="agent", messages=messages)
    with model.metrics_builder("eval").activate_context():  # a client from with_options prices too
        await client.with_options(timeout=30).chat.completions.create(model="agent", messages=messages, n=3)
    assert response.choices[0].message.content == "hi"  # the body is still the client's to read
    await model.log(None, split="train", step=1)
    await model.log(None, split="val", step=1)

    train_row, val_row = model.history()
    assert train_row["costs/train/tinker_prefill"] == pytest.approx(0.1)  # 1M prompt tokens at $0.1/M
    assert train_row["costs/train/tinker_sample"] == pytest.approx(0.6)  # 2M completion tokens at $0.3/M
    assert train_row["costs/train"] == pytest.approx(0.7)
    assert val_row["costs/eval/tinker_prefill"] == pytest.approx(0.3)  # three samples, each pays the prompt
    assert val_row["costs/cum/all"] == pytest.approx(0.7 + 0.3 + 0.6)

    model.set_cost_calculator(None)
    with model.metrics_builder("train").activate_context():
        await client.chat.completions.create(model="agent", messages=messages)
    assert await model.metrics_builder("train").flush() == {}


def test_chat_template_kwargs_are_sent_only_to_a_server_that_takes_them(tmp_path: Path) -> None:
    """The reference adds `_internal_config["chat_template_kwargs"]` to every request (its vLLM renders with
    them); our server refuses them (the trainer would render differently), so they go only to a backend
    that says it accepts them."""
    from art.model import _OpenAIChatCompletionsProxy

    model = art.TrainableModel(
        name="m",
        project="p",
        base_model="x",
        base_path=str(tmp_path),
        _internal_config={"chat_template_kwargs": {"enable_thinking": False}},
    )
    assert model._default_chat_completion_extra_body() == {"chat_template_kwargs": {"enable_thinking": False}}
    model.inference_base_url, model.inference_api_key = "http://127.0.0.1:9/v1", "k"
    plain = model.openai_client().chat.completions
    assert isinstance(plain, _OpenAIChatCompletionsProxy) and plain._default_extra_body is None

    class TakesKwargs:
        accepts_chat_template_kwargs = True

    model._backend = TakesKwargs()  # type: ignore[assignment]
    model._clients.clear()
    assert model.openai_client().chat.completions._default_extra_body == {  # type: ignore[attr-defined]
        "chat_template_kwargs": {"enable_thinking": False}
    }
