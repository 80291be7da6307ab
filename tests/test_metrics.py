"""art.metrics.MetricsBuilder and art.api_costs.track_api_cost on their own (no model): what one step's row
holds, what carries over to the next step, and how a judge's response is priced."""

from __future__ import annotations

import asyncio
import time
from types import SimpleNamespace
from typing import Any

import pytest

from art.api_costs import MODEL_TOKEN_PRICING, extract_api_cost
from art.costs import ModelPricing, build_cost_calculator, get_model_pricing
from art.metrics import MetricsBuilder, track_api_cost


def openai_response(prompt: int, completion: int, cached: int = 0) -> Any:
    """The shape of an `openai` ChatCompletion's usage (attributes, not a dict)."""
    details = SimpleNamespace(cached_tokens=cached)
    return SimpleNamespace(
        usage=SimpleNamespace(
            prompt_tokens=prompt, completion_tokens=completion, prompt_tokens_details=details
        )
    )


def anthropic_response(inputs: int, outputs: int, written: int = 0, read: int = 0) -> dict[str, Any]:
    """The shape of an Anthropic Message's usage, as a plain dict."""
    return {
        "usage": {
            "input_tokens": inputs,
            "output_tokens": outputs,
            "cache_creation_input_tokens": written,
            "cache_read_input_tokens": read,
        }
    }


# ---- one step's row ----------------------------------------------------------------------------
async def test_costs_roll_up_to_every_parent_and_to_costs_all() -> None:
    builder = MetricsBuilder("train")
    builder.add_cost("train/llm_judge/correctness", usd=0.25)
    builder.add_cost("train/llm_judge/style", usd=0.5)
    builder.add_cost("train/gpu", usd=2.0)
    builder.add_cost("eval/llm_judge/correctness", usd=1.0)

    row = await builder.flush()

    assert row["costs/train/llm_judge"] == pytest.approx(0.75)
    assert row["costs/train"] == pytest.approx(2.75)
    assert row["costs/eval"] == pytest.approx(1.0)
    assert row["costs/all"] == pytest.approx(3.75)
    assert row["costs/cum/all"] == pytest.approx(3.75)
    assert row["costs/cum/train/llm_judge"] == pytest.approx(0.75)


async def test_values_added_to_one_key_in_one_step_are_summed() -> None:
    builder = MetricsBuilder("train")
    builder.add_data(step_num_scenarios=2, step_actor_tokens=100)
    builder.add_data(step_num_scenarios=3, step_actor_tokens=50)
    builder.add_user_timing(step_wall_s=1.0, step_eval_s=0.5)
    builder.add_user_timing(step_wall_s=2.0)
    builder.add_idle_times(step_trainer_idle_s=1.0, step_actor_idle_s=4.0)
    builder.add_idle_times(step_trainer_idle_s=0.5)

    row = await builder.flush()

    assert row["data/step_num_scenarios"] == 5 and row["data/step_actor_tokens"] == 150
    assert row["time/step_wall_s"] == 3.0 and row["time/step_eval_s"] == 0.5
    assert row["throughput/step_trainer_idle_s"] == 1.5 and row["throughput/step_actor_idle_s"] == 4.0


async def test_a_step_with_nothing_added_writes_nothing_not_even_old_totals() -> None:
    builder = MetricsBuilder("train")
    builder.add_cost("train/gpu", usd=1.0)
    builder.add_metric("time/step_trainer_s", 2.0)
    builder.add_metric("data/step_trainer_tokens", 10.0)
    assert (await builder.flush())["costs/cum/all"] == 1.0
    assert await builder.flush() == {}


def test_a_key_cannot_be_a_value_and_a_parent_in_one_step() -> None:
    builder = MetricsBuilder("train")
    builder.add_cost("train/llm_judge", usd=0.1)
    with pytest.raises(ValueError, match="parent"):
        builder.add_cost("train/llm_judge/style", usd=0.1)
    other = MetricsBuilder("train")
    other.add_cost("train/llm_judge/style", usd=0.1)
    with pytest.raises(ValueError, match="parent"):
        other.add_cost("train/llm_judge", usd=0.1)


def test_keys_the_builder_owns_or_cannot_total_are_refused_by_name() -> None:
    builder = MetricsBuilder("train")
    with pytest.raises(ValueError, match="cumulative"):
        builder.add_metric("costs/cum/all", 1.0)
    with pytest.raises(ValueError, match="section prefix"):
        builder.add_metric("latency", 1.0)
    with pytest.raises(ValueError, match="finite"):
        builder.add_metric("time/step_actor_s", float("nan"))
    with pytest.raises(ValueError, match="non-empty"):
        MetricsBuilder("")


async def test_measure_records_the_seconds_of_the_block_even_when_it_raises() -> None:
    builder = MetricsBuilder("train")
    with builder.measure("time/step_actor_s"):
        await asyncio.sleep(0.05)
    with pytest.raises(KeyError), builder.measure("time/step_actor_s"):
        time.sleep(0.02)
        raise KeyError("boom")

    row = await builder.flush()

    assert 0.07 <= row["time/step_actor_s"] < 5.0
    assert row["time/cum/actor_s"] == row["time/step_actor_s"]


# ---- across steps -------------------------------------------------------------------------------
async def test_totals_grow_across_steps_and_unique_scenarios_are_counted_once() -> None:
    builder = MetricsBuilder("train")
    builder.add_user_timing(step_actor_s=2.0)
    builder.add_data(step_actor_tokens=100, scenario_ids=["a", "b"])
    first = await builder.flush()
    builder.add_user_timing(step_actor_s=3.0)
    builder.add_data(step_actor_tokens=400, scenario_ids=["b", "c"])
    second = await builder.flush()

    assert first["time/cum/actor_s"] == 2.0 and second["time/cum/actor_s"] == 5.0
    assert second["data/cum/actor_tokens"] == 500
    assert first["data/cum/num_unique_scenarios"] == 2 and second["data/cum/num_unique_scenarios"] == 3
    # throughput over the whole run so far, not over the last step only
    assert first["throughput/avg_actor_tok_per_s"] == pytest.approx(50.0)
    assert second["throughput/avg_actor_tok_per_s"] == pytest.approx(100.0)


async def test_trainer_throughput_and_idle_totals() -> None:
    builder = MetricsBuilder("train")
    builder.add_metric("time/step_trainer_s", 4.0)
    builder.add_metric("data/step_trainer_tokens", 40.0)
    builder.add_idle_times(step_trainer_idle_s=1.0)
    await builder.flush()
    builder.add_idle_times(step_trainer_idle_s=2.0)
    row = await builder.flush()
    assert row["throughput/cum/trainer_idle_s"] == 3.0
    assert "throughput/avg_trainer_tok_per_s" not in row  # no trainer time or tokens in this step

    builder.add_metric("time/step_trainer_s", 1.0)
    assert (await builder.flush())["throughput/avg_trainer_tok_per_s"] == pytest.approx(8.0)


async def test_state_dict_round_trip_carries_the_totals_to_a_new_builder() -> None:
    before = MetricsBuilder("train")
    before.add_cost("train/gpu", usd=1.0)
    before.add_data(scenario_ids=["a"])
    await before.flush()
    before.add_cost("train/gpu", usd=100.0)  # pending, not flushed: not part of the saved state

    after = MetricsBuilder("train")
    after.load_state_dict(before.state_dict())
    after.add_cost("train/gpu", usd=2.0)
    after.add_data(scenario_ids=["a", "b"])
    row = await after.flush()

    assert row["costs/cum/train/gpu"] == 3.0 and row["costs/cum/all"] == 3.0
    assert row["data/cum/num_unique_scenarios"] == 2


async def test_contexts_share_totals_but_each_flushes_only_its_own_step() -> None:
    train = MetricsBuilder("train")
    evaluation = train.for_cost_context("eval")
    assert train.for_cost_context("train") is train
    train.add_cost("train/gpu", usd=1.0)
    evaluation.add_cost("eval/judge", usd=2.0)

    eval_row = await evaluation.flush()
    train_row = await train.flush()

    assert "costs/train/gpu" not in eval_row and eval_row["costs/cum/all"] == 2.0
    assert "costs/eval/judge" not in train_row and train_row["costs/cum/all"] == 3.0


async def test_concurrent_adds_from_tasks_and_a_thread_lose_nothing() -> None:
    builder = MetricsBuilder("train")

    async def task() -> None:
        for _ in range(50):
            builder.add_cost("train/gpu", usd=0.01)
            await asyncio.sleep(0)

    def thread() -> None:  # e.g. a sync judge run with asyncio.to_thread
        for _ in range(50):
            builder.add_cost("train/gpu", usd=0.01)

    await asyncio.gather(*(task() for _ in range(3)), asyncio.to_thread(thread))
    assert (await builder.flush())["costs/train/gpu"] == pytest.approx(2.0)


# ---- track_api_cost -----------------------------------------------------------------------------
@track_api_cost(source="llm_judge/correctness", provider="openai", model_name="openai/gpt-4.1")
async def openai_judge(prompt: int, completion: int, cached: int = 0) -> Any:
    return openai_response(prompt, completion, cached)


async def test_track_api_cost_goes_to_the_active_context_and_nowhere_without_one() -> None:
    root = MetricsBuilder("train")
    evaluation = root.for_cost_context("eval")

    with root.activate_context():
        await openai_judge(1_000_000, 0)  # 1M prompt tokens of gpt-4.1: $2
    with evaluation.activate_context():
        assert MetricsBuilder.get_active() is evaluation
        await openai_judge(0, 1_000_000)  # 1M completion tokens: $8
    result = await openai_judge(10, 10)  # no context: returned untouched, recorded nowhere
    with pytest.raises(LookupError):
        MetricsBuilder.get_active()

    train_row, eval_row = await root.flush(), await evaluation.flush()
    assert result.usage.prompt_tokens == 10
    assert train_row["costs/train/llm_judge/correctness"] == pytest.approx(2.0)
    assert eval_row["costs/eval/llm_judge/correctness"] == pytest.approx(8.0)
    assert eval_row["costs/eval"] == pytest.approx(8.0) and eval_row["costs/cum/all"] == pytest.approx(10.0)


async def test_openai_cached_prompt_tokens_are_priced_at_the_cached_price() -> None:
    builder = MetricsBuilder("train")
    with builder.activate_context():
        await openai_judge(1_000_000, 0, cached=800_000)
    row = await builder.flush()
    # 200k at $2/M plus 800k at gpt-4.1's cached $0.5/M
    assert row["costs/train/llm_judge/correctness"] == pytest.approx(0.4 + 0.4)


def test_a_sync_function_and_a_response_getter_work_too() -> None:
    @track_api_cost(
        source="teacher",
        provider="anthropic",
        model_name="claude-sonnet-4-6",  # without the provider prefix: "anthropic/" is assumed
        response_getter=lambda pair: pair[1],
    )
    def teach() -> tuple[str, dict[str, Any]]:
        return "text", anthropic_response(1_000_000, 1_000_000, written=1_000_000, read=1_000_000)

    builder = MetricsBuilder("train")
    with builder.activate_context():
        assert teach()[0] == "text"
    cost = builder._shared.pending["train"].values["costs/train/teacher"]
    assert cost == pytest.approx(3.0 + 15.0 + 3.75 + 0.3)


def test_an_unknown_model_is_an_error_that_names_register_model_pricing() -> None:
    @track_api_cost(source="judge", provider="openai", model_name="openai/my-finetune")
    def judge() -> Any:
        return openai_response(100, 100)

    builder = MetricsBuilder("eval")
    with builder.activate_context(), pytest.raises(ValueError, match="No pricing configured") as raised:
        judge()
    assert "register_model_pricing('openai/my-finetune'" in str(raised.value)

    builder.register_model_pricing("openai/my-finetune", prompt_per_million=1.0, completion_per_million=3.0)
    with builder.activate_context():
        judge()
    assert builder._shared.pending["eval"].values["costs/eval/judge"] == pytest.approx(0.0004)


def test_a_model_outside_our_table_is_priced_from_litellms_map() -> None:
    """As the reference: LiteLLM's bundled price map (`judge` extra) is the fallback for unknown models."""
    pytest.importorskip("litellm", reason="LiteLLM comes with the judge extra")

    @track_api_cost(source="judge", provider="openai", model_name="openai/gpt-3.5-turbo")
    def judge() -> Any:
        return openai_response(1_000_000, 1_000_000)

    builder = MetricsBuilder("eval")
    with builder.activate_context():
        judge()  # $0.50 per million prompt tokens, $1.50 per million completion tokens in LiteLLM's map
    assert builder._shared.pending["eval"].values["costs/eval/judge"] == pytest.approx(0.5 + 1.5)


def test_explicit_prices_override_the_table_and_price_an_unknown_model() -> None:
    assert extract_api_cost(
        openai_response(1_000_000, 1_000_000),
        provider="openai",
        model_name="openai/gpt-4.1",
        completion_price_per_million=1.0,
    ) == pytest.approx(2.0 + 1.0)
    assert extract_api_cost(
        openai_response(1_000_000, 0),
        provider="openai",
        model_name="local/judge",
        prompt_price_per_million=0.5,
        completion_price_per_million=0.5,
    ) == pytest.approx(0.5)


def test_a_cost_the_response_states_wins_and_other_providers_need_an_extractor() -> None:
    stated = {"usage": {"prompt_tokens": 10, "completion_tokens": 10, "cost": 0.123}}  # e.g. OpenRouter
    assert extract_api_cost(stated, provider="openai", model_name="openai/unknown") == 0.123

    builder = MetricsBuilder("train")
    with pytest.raises(ValueError, match="register_cost_extractor"):
        builder.add_response_cost("judge", {"usage": {}}, provider="gemini", model_name="gemini-2.5")
    builder.register_cost_extractor("Gemini", lambda response: response["usd"])
    assert builder.add_response_cost("judge", {"usd": 0.5}, provider="gemini", model_name="gemini-2.5") == 0.5


def test_a_misspelt_price_keyword_is_a_type_error_as_for_any_unknown_argument() -> None:
    response = openai_response(1000, 500)
    bad: dict[str, Any] = {"prompt_price": 1.0}  # not `prompt_price_per_million`
    with pytest.raises(
        TypeError, match=r"extract_api_cost\(\) got an unexpected keyword argument 'prompt_price'"
    ):
        extract_api_cost(response, provider="openai", model_name="openai/gpt-4.1", **bad)
    with pytest.raises(TypeError, match=r"track_api_cost\(\) got an unexpected"):
        track_api_cost(source="judge", provider="openai", model_name="openai/gpt-4.1", **bad)
    with pytest.raises(TypeError, match=r"add_response_cost\(\) got an unexpected"):
        MetricsBuilder("train").add_response_cost("judge", response, provider="openai", model_name="x", **bad)


def test_a_response_without_usage_of_its_provider_is_an_error() -> None:
    with pytest.raises(ValueError, match="does not match provider 'anthropic'"):
        extract_api_cost(
            openai_response(10, 10), provider="anthropic", model_name="anthropic/claude-sonnet-4-6"
        )


def test_the_price_table_holds_the_models_the_docs_name() -> None:
    assert {"openai/gpt-4.1", "anthropic/claude-sonnet-4-6"} <= set(MODEL_TOKEN_PRICING)


# ---- art.costs: the trained model's own per-token prices ----------------------------------------
def test_build_cost_calculator_names_the_reference_keys_and_unknown_pricing_is_none_or_strict() -> None:
    calculator = build_cost_calculator(ModelPricing(prefill=0.1, sample=0.3, train=0.3))
    assert calculator(1_000_000, 2_000_000, "eval") == {
        "costs/eval/tinker_prefill": pytest.approx(0.1),
        "costs/eval/tinker_sample": pytest.approx(0.6),
    }
    assert get_model_pricing("my/own-base-model") is None
    with pytest.raises(ValueError, match=r"art\.costs\.MODEL_PRICING"):
        get_model_pricing("my/own-base-model", strict=True)
    # the reference's table of its hosted prices, for code that looks them up
    assert get_model_pricing("Qwen/Qwen3-8B") == ModelPricing(prefill=0.13, sample=0.40, train=0.40)
