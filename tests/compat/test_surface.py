"""The reference's public surface, without a model: names, signatures and semantics of the client side.

(Behaviour through a real server is in test_served_model.py and the example loops beside this file.)
"""

from __future__ import annotations

import asyncio
import copy
import inspect
import subprocess
import sys
import warnings
from pathlib import Path
from typing import Any

import pytest
from helpers_choices import make_choice
from pydantic import ValidationError

import art
from art.auto_trajectory import choice_from_sse
from art.backends import internal_config, train_options
from art.backends.train_options import resolve_train_kwargs

# Every keyword of the reference's LocalBackend.train (0.5.18) besides (model, trajectory_groups).
REFERENCE_TRAIN_KEYWORDS = {
    "learning_rate", "loss_fn", "loss_fn_config", "normalize_advantages", "adam_params", "kl_penalty_coef",
    "kl_penalty_reference_step", "kl_ref_adapter_path", "kl_penalty_source", "epsilon", "epsilon_high",
    "advantage_balance", "scale_rewards", "importance_sampling_level",
    "max_negative_advantage_importance_sampling_weight", "mask_prob_ratio", "kimi_k2_tau",
    "precalculate_logprobs", "allow_training_without_logprobs", "plot_tensors",
    "truncated_importance_sampling", "scale_learning_rate_by_reward_std_dev",
    "logprob_calculation_chunk_size", "packed_sequence_length", "megatron_topology",
    "num_trajectories_learning_rate_multiplier_power", "save_checkpoint", "verbose",
    # openpipe-art 0.5.23's additions
    "optimizer_save_interval", "final_training_step", "grad_accumulation_sequences",
}  # fmt: skip


@pytest.fixture(autouse=True)
def _fresh_once_warnings(monkeypatch: pytest.MonkeyPatch) -> None:
    """The "once per process" warnings start afresh in every test."""
    monkeypatch.setattr(train_options, "_warned", set())
    monkeypatch.setattr(internal_config, "_warned", set())


def group(rewards: list[float]) -> art.TrajectoryGroup:
    return art.TrajectoryGroup(
        art.Trajectory(messages_and_choices=[{"role": "user", "content": "q"}, make_choice()], reward=r)
        for r in rewards
    )


# ---- imports and signatures ------------------------------------------------------------------------------
def test_local_backend_under_the_reference_names_and_signature() -> None:
    from art.local import LocalBackend as from_package
    from art.local.backend import LocalBackend as from_module

    assert from_module is from_package is art.LocalBackend
    parameters = inspect.signature(art.LocalBackend).parameters
    for name in ("in_process", "path", "gpu_cost_per_hour_usd", "enable_expert_replay"):
        assert parameters[name].kind is inspect.Parameter.KEYWORD_ONLY
    backend = art.LocalBackend(path="/tmp/records")  # builds nothing until a model registers
    assert backend.path == "/tmp/records"
    with pytest.warns(UserWarning, match="in_process=False.*no effect"):
        art.LocalBackend(in_process=False)


def test_import_art_is_light_and_has_the_reference_names() -> None:
    code = (
        "import sys, art\n"
        "names = ['dev', 'auto_trajectory', 'capture_auto_trajectory', 'capture_yielded_trajectory',\n"
        "         'yield_trajectory', 'trajectory_group_batches', 'LocalTrainResult', 'Backend', 'Model',\n"
        "         'TrainableModel', 'Trajectory', 'TrajectoryGroup', 'TrainConfig', 'TrainResult', 'retry',\n"
        "         'gather_trajectories', 'gather_trajectory_groups', 'Messages', 'MessagesAndChoices', 'Tools',\n"
        "         'MegatronTopologyConfig']\n"
        "missing = [n for n in names if not hasattr(art, n)]\n"
        "assert not missing, missing\n"
        "art.dev.InternalModelConfig, art.dev.InitArgs, art.dev.EngineArgs, art.dev.LoRAConfig\n"
        "from art.utils import limit_concurrency, iterate_dataset, retry\n"
        "from art.utils.strip_logprobs import strip_logprobs\n"
        "heavy = [m for m in ('torch', 'transformers', 'fastapi', 'uvicorn', 'peft', 'litellm') if m in sys.modules]\n"
        "assert not heavy, heavy\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


# ---- backend.train keywords ------------------------------------------------------------------------------
def test_every_reference_train_keyword_is_accepted() -> None:
    assert set(train_options.valid_keywords()) >= REFERENCE_TRAIN_KEYWORDS
    defaults = {k: v for k, v in train_options.NO_EFFECT_DEFAULTS.items()}
    options = resolve_train_kwargs(
        {"learning_rate": 2e-5, "loss_fn": "ppo", "normalize_advantages": True, "verbose": True, **defaults}
    )
    assert options.spec.learning_rate == 2e-5 and options.spec.loss_fn == "ppo" and options.verbose


def test_normalize_advantages_false_means_no_scaling_by_the_spread() -> None:
    assert resolve_train_kwargs({"normalize_advantages": False}).spec.scale_rewards is False
    assert resolve_train_kwargs({"normalize_advantages": True}).spec.scale_rewards is True


def test_a_keyword_without_effect_here_warns_once_naming_it() -> None:
    with pytest.warns(
        UserWarning, match=r"backend\.train\(advantage_balance=0\.5\) has no effect here"
    ) as seen:
        resolve_train_kwargs({"advantage_balance": 0.5})
        resolve_train_kwargs({"advantage_balance": 0.7})
    assert len([w for w in seen if "advantage_balance" in str(w.message)]) == 1
    with pytest.warns(UserWarning, match="kl_penalty_reference_step=3.*always to the base model"):
        resolve_train_kwargs({"kl_penalty_reference_step": 3})


def test_a_typo_is_refused_with_the_closest_keyword(fake_backend: Any, tmp_path: Path) -> None:
    with pytest.raises(
        TypeError, match=r"unknown training option 'learning_rte' \(did you mean 'learning_rate'\?\)"
    ):
        resolve_train_kwargs({"learning_rte": 1e-5})
    with pytest.raises(TypeError, match=r"'normalise_advantages' \(did you mean 'normalize_advantages'\?\)"):
        resolve_train_kwargs({"normalise_advantages": False})
    with pytest.raises(ValueError, match=r"loss_fn_config=\.\.\.\) must be None"):
        resolve_train_kwargs({"loss_fn_config": {"clip": 0.1}})


async def test_backend_train_result_names_the_checkpoint(fake_backend: Any, tmp_path: Path) -> None:
    model = art.TrainableModel(name="m", project="p", base_model="tiny", base_path=str(tmp_path))
    await model.register(fake_backend)
    result = await fake_backend.train(model, [group([0.0, 1.0])], normalize_advantages=False, verbose=False)
    assert result.step == 1 and result.checkpoint_path is None  # the fake does not say; LocalBackend does
    assert issubclass(art.LocalTrainResult, art.TrainResult)
    assert art.LocalTrainResult(step=2, checkpoint_path="/x").checkpoint_path == "/x"
    assert fake_backend.train_calls[0]["spec"].scale_rewards is False


# ---- models ------------------------------------------------------------------------------------------------
def test_inference_names_without_a_backend_follow_the_reference() -> None:
    prompted = art.Model(name="gpt-4o", project="p", inference_model_name="openai/gpt-4o")
    assert prompted.get_inference_name() == "openai/gpt-4o"
    assert prompted.get_inference_name(step=5) == "openai/gpt-4o@5"
    trainable = art.TrainableModel(name="agent", project="p", base_model="tiny")
    assert trainable.get_inference_name(step=5) == "agent@5"


async def test_litellm_completion_params(fake_backend: Any, tmp_path: Path) -> None:
    prompted = art.Model(
        name="gpt",
        project="p",
        inference_base_url="http://h/v1",
        inference_api_key="k",
        inference_model_name="g",
    )
    assert prompted.litellm_completion_params() == {
        "model": "g", "base_url": "http://h/v1", "api_key": "k", "temperature": 1,
    }  # fmt: skip
    model = art.TrainableModel(name="agent", project="p", base_model="tiny", base_path=str(tmp_path))
    await model.register(fake_backend)
    params = model.litellm_completion_params(step=2)
    assert params["model"] == "hosted_vllm/agent@2" and params["base_url"] == "http://127.0.0.1:9/v1"
    assert model.litellm_completion_params()["model"] == "hosted_vllm/agent@0"


def test_internal_config_by_keyword_or_assignment_and_what_applies() -> None:
    model = art.TrainableModel(
        name="m",
        project="p",
        base_model="tiny",
        _internal_config={"init_args": {"gpu_memory_utilization": 0.7}},
    )
    assert model._internal_config == {"init_args": {"gpu_memory_utilization": 0.7}}
    model._internal_config = art.dev.InternalModelConfig(
        init_args=art.dev.InitArgs(max_seq_length=512),
        engine_args=art.dev.EngineArgs(max_num_seqs=8, max_loras=3),
    )
    assert "_internal_config" not in model.model_dump()  # not part of the record
    with pytest.warns(UserWarning, match=r"_internal_config\.trainer_args .*no effect"):
        options = internal_config.resolve_internal_config(
            {**model._internal_config, "trainer_gpu_ids": [0], "inference_gpu_ids": [1], "trainer_args": {}},
            {"engine_args": {"dtype": "auto"}},
        )
    assert (options.max_model_len, options.max_num_seqs, options.max_loaded_adapters) == (512, 8, 3)
    assert options.dtype is None
    # dedicated mode's GPU ids apply (docs/scale.md); what has no counterpart is said
    assert (options.trainer_gpu_ids, options.inference_gpu_ids) == ((0,), (1,))
    assert options.ignored == ["_internal_config.trainer_args"]


def test_lora_config_in_the_reference_form() -> None:
    assert art.LoRAConfig(rank=16).r == 16  # type: ignore[call-arg]
    with pytest.warns(UserWarning, match="bias, use_rslora .*no effect"):
        model = art.TrainableModel(
            name="m",
            project="p",
            base_model="tiny",
            lora_config=art.dev.LoRAConfig(rank=4, alpha=8, bias="none", use_rslora=True),  # type: ignore[arg-type]
        )
    assert model.lora_config is not None and (model.lora_config.r, model.lora_config.alpha) == (4, 8)
    with pytest.raises(ValueError, match="lora_config"):
        art.dev.PeftArgs(r=8)


# ---- trajectories ------------------------------------------------------------------------------------------
def test_copy_of_a_group_does_not_share_its_lists() -> None:
    original = group([0.0, 1.0])
    original.metadata["scenario"] = "a"
    original.log("made by hand")
    shallow = copy.copy(original)
    shallow.trajectories.append(art.Trajectory(reward=3.0))
    shallow.metadata["scenario"] = "b"
    shallow.log("copied")
    assert len(original.trajectories) == 2 and original.metadata == {"scenario": "a"}
    assert original.logs == ["made by hand"] and shallow.logs == ["made by hand", "copied"]
    assert shallow.trajectories[0] is original.trajectories[0]  # the reference: same Trajectory objects
    deep = copy.deepcopy(original)
    deep.trajectories[0].reward = 9.0
    assert original.trajectories[0].reward == 0.0 and deep == copy.deepcopy(deep)


def test_trajectory_defaults_and_durations() -> None:
    trajectory = art.Trajectory()  # the reference allows an empty one (auto_trajectory starts so)
    assert trajectory.messages_and_choices == [] and trajectory.reward == 0.0

    async def timed() -> None:
        async with trajectory.track_duration("tool"):
            await asyncio.sleep(0.01)

    asyncio.run(timed())
    assert trajectory.finish() is trajectory
    assert trajectory.metrics["tool_duration"] >= 0.01 and trajectory.metrics["duration"] >= 0.01


# ---- utils -------------------------------------------------------------------------------------------------
def test_strip_logprobs_leaves_the_input_alone() -> None:
    from art.utils.strip_logprobs import strip_logprobs

    choice = make_choice()
    data = {"choice": choice, "logprobs": [1], "nested": [{"logprobs": None, "keep": 1}]}
    stripped = strip_logprobs(data)
    assert stripped["choice"].logprobs is None and "logprobs" not in stripped
    assert stripped["nested"] == [{"keep": 1}]
    assert choice.logprobs is not None and data["logprobs"] == [1]  # untouched


async def test_limit_concurrency_per_key() -> None:
    from art.utils import limit_concurrency

    running: dict[str, int] = {}
    peak: dict[str, int] = {}

    @limit_concurrency(2, derive_key=lambda key, i: key)
    async def work(key: str, i: int) -> int:
        running[key] = running.get(key, 0) + 1
        peak[key] = max(peak.get(key, 0), running[key])
        await asyncio.sleep(0.01)
        running[key] -= 1
        return i

    results = await asyncio.gather(*(work(k, i) for k in ("a", "b") for i in range(6)))
    assert results == list(range(6)) * 2
    assert peak == {"a": 2, "b": 2}


def test_convert_litellm_choice_to_openai() -> None:
    pytest.importorskip("litellm")
    from litellm.types.utils import Choices

    from art.utils.litellm import convert_litellm_choice_to_openai

    litellm_choice = Choices(
        index=0,
        finish_reason="tool_calls",
        message={
            "role": "assistant",
            "content": None,
            "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}],
        },
        logprobs={"content": [{"token": "x", "logprob": -0.5, "bytes": None, "top_logprobs": []}]},
    )
    choice = convert_litellm_choice_to_openai(litellm_choice)
    assert choice.message.tool_calls is not None and choice.message.tool_calls[0].function.name == "f"  # type: ignore[union-attr]
    assert choice.logprobs is not None and choice.logprobs.content[0].logprob == -0.5  # type: ignore[index]
    assert (
        art.Trajectory(messages_and_choices=[{"role": "user", "content": "q"}, choice]).num_trainable_turns()
        == 1
    )


# ---- yielded and auto trajectories, batches ----------------------------------------------------------------
async def test_capture_yielded_trajectory() -> None:
    async def solve(n: int) -> str:
        art.yield_trajectory(art.Trajectory(reward=float(n)))
        return "answer"

    assert (await art.capture_yielded_trajectory(solve(3))).reward == 3.0
    assert await solve(1) == "answer"  # outside a capture yielding does nothing

    async def silent() -> None:
        pass

    with pytest.raises(RuntimeError, match=r"without calling art\.yield_trajectory"):
        await art.capture_yielded_trajectory(silent())


async def test_auto_trajectory_outside_a_capture() -> None:
    assert art.auto_trajectory() is None
    with pytest.raises(RuntimeError, match="capture_auto_trajectory"):
        art.auto_trajectory(required=True)


def test_a_streamed_choice_is_merged_whole() -> None:
    def event(choice: dict[str, Any]) -> str:
        return (
            'data: {"id": "x", "object": "chat.completion.chunk", "choices": ['
            + __import__("json").dumps(choice)
            + "]}\n\n"
        )

    lp = {"token": "a", "logprob": -1.0, "bytes": None, "top_logprobs": []}
    text = (
        event({"index": 0, "delta": {"role": "assistant", "content": ""}, "logprobs": None, "finish_reason": None})
        + event({"index": 0, "delta": {"content": "Hel"}, "logprobs": {"content": [lp]}, "token_ids": [5], "finish_reason": None, "checkpoint_step": 2})
        + event({"index": 0, "delta": {"content": "lo", "tool_calls": [{"index": 0, "id": "c", "function": {"name": "f", "arguments": '{"a":'}}]}, "logprobs": {"content": [lp]}, "token_ids": [6], "finish_reason": None})
        + event({"index": 0, "delta": {"tool_calls": [{"index": 0, "function": {"arguments": " 1}"}}]}, "finish_reason": "tool_calls", "token_ids": []})
        + "data: [DONE]\n\n"
    )  # fmt: skip
    choice = choice_from_sse(text)
    assert choice is not None and choice.message.content == "Hello" and choice.finish_reason == "tool_calls"
    assert choice.message.tool_calls[0].function.arguments == '{"a": 1}'  # type: ignore[index, union-attr]
    assert choice.logprobs is not None and len(choice.logprobs.content or []) == 2
    assert (choice.model_extra or {})["token_ids"] == [5, 6] and (choice.model_extra or {})[
        "checkpoint_step"
    ] == 2
    assert choice_from_sse(text.split("data: [DONE]")[0].rsplit("data:", 1)[0]) is None  # unfinished stream


async def test_trajectory_group_batches() -> None:
    started: list[int] = []

    async def rollout(i: int) -> art.Trajectory:
        started.append(i)
        await asyncio.sleep(0.01 * (i % 3))
        return art.Trajectory(reward=float(i))

    groups = [art.TrajectoryGroup([rollout(i)]) for i in range(10)]
    batches = [
        batch
        async for batch in art.trajectory_group_batches(
            groups, batch_size=4, max_concurrent_batches=1, skip_batches=1, pbar_desc=None
        )
    ]
    assert [len(b) for b in batches] == [4, 2]
    assert sorted(g.trajectories[0].reward for b in batches for g in b) == [4.0, 5.0, 6.0, 7.0, 8.0, 9.0]
    assert 0 not in started  # the first batch was skipped, never run


async def test_trajectory_group_batches_exception_budget() -> None:
    async def fails() -> art.Trajectory:
        raise ValueError("boom")

    async def works() -> art.Trajectory:
        return art.Trajectory(reward=1.0)

    groups = [art.TrajectoryGroup([works(), works()]), art.TrajectoryGroup([fails(), works()])]
    batches = [
        b
        async for b in art.trajectory_group_batches(
            groups, batch_size=2, max_batch_exceptions=1, pbar_desc=None
        )
    ]
    assert len(batches) == 1 and sum(len(g.exceptions) for g in batches[0]) == 1
    groups = [art.TrajectoryGroup([fails(), fails()])]
    with pytest.raises(art.TooManyExceptions):
        async for _ in art.trajectory_group_batches(groups, batch_size=1, pbar_desc=None):
            pass


async def test_small_utils_of_the_reference(fake_backend: Any, tmp_path: Path) -> None:
    import httpx

    from art.utils import format_message, get_model_step, log_http_errors

    text = format_message(
        {
            "role": "assistant",
            "content": "Looking.",
            "tool_calls": [{"function": {"name": "f", "arguments": "{}"}}],
        }
    )
    assert text == "Assistant:\nLooking.\nf({})"
    model = art.TrainableModel(name="m", project="p", base_model="tiny", base_path=str(tmp_path))
    assert get_model_step(model) == 0
    await model.register(fake_backend)
    await model.train([group([0.0, 1.0])])
    assert get_model_step(model, str(tmp_path)) == 1

    @log_http_errors
    async def call() -> None:
        request = httpx.Request("GET", "http://h/x")
        response = httpx.Response(404, json={"detail": "no such thing"}, request=request)
        response.raise_for_status()

    with pytest.raises(Exception, match=r"\[HTTP 404\] http://h/x no such thing"):
        await call()


def test_a_models_reference_settings_fill_only_what_the_user_left_open() -> None:
    model = art.TrainableModel(
        name="m",
        project="p",
        base_model="tiny",
        _internal_config=art.dev.InternalModelConfig(
            engine_args=art.dev.EngineArgs(max_num_seqs=8, max_model_len=256, max_loras=2)
        ),
    )
    chosen = art.LocalBackend(max_num_seqs=3)._options_for(model)
    assert (chosen.max_num_seqs, chosen.max_model_len, chosen.max_loaded_adapters) == (3, 256, 2)
    from_options = art.LocalBackend(options=art.RuntimeOptions(max_loaded_adapters=5))._options_for(model)
    assert (from_options.max_num_seqs, from_options.max_loaded_adapters) == (8, 5)
    with pytest.raises(ValueError, match="max_loaded_adapters"):
        art.LocalBackend(max_loaded_adapters=0)


async def test_the_tracking_metrics_page_of_the_reference_runs_as_written(
    fake_backend: Any, tmp_path: Path
) -> None:
    """The calls the reference's "Tracking Metrics" page shows, in its order, with a stand-in judge client."""
    from types import SimpleNamespace

    from art.metrics import track_api_cost

    class JudgeCompletions:
        async def create(self, **kwargs: Any) -> Any:
            return SimpleNamespace(usage=SimpleNamespace(prompt_tokens=1_000, completion_tokens=100))

    judge_client = SimpleNamespace(chat=SimpleNamespace(completions=JudgeCompletions()))
    model = art.TrainableModel(name="m", project="p", base_model="tiny", base_path=str(tmp_path))
    await model.register(fake_backend)

    @track_api_cost(source="llm_judge/correctness", provider="openai", model_name="openai/gpt-4.1")
    async def run_judge(client: Any, messages: list[dict[str, str]]) -> Any:
        return await client.chat.completions.create(model="gpt-4.1", messages=messages)

    builder = model.metrics_builder()
    with builder.measure("time/step_actor_s"), model.metrics_builder("train").activate_context():
        await run_judge(judge_client, [{"role": "user", "content": "train"}])
    builder.add_data(step_num_scenarios=1, step_actor_tokens=50, scenario_ids=["s1"])
    builder.add_idle_times(step_actor_idle_s=0.25)
    await model.log([group([0.0, 1.0])], split="train", step=1)
    with model.metrics_builder("eval").activate_context():
        await run_judge(judge_client, [{"role": "user", "content": "eval"}])
    await model.log([group([1.0])], split="val", step=1)
    builder.register_model_pricing(
        "anthropic/my-custom-judge", prompt_per_million=1.2, completion_per_million=4.8
    )

    train_row, val_row = model.history()
    judge_cost = (1_000 * 2.0 + 100 * 8.0) / 1_000_000  # gpt-4.1 list prices
    assert train_row["costs/train/llm_judge/correctness"] == pytest.approx(judge_cost)
    assert train_row["costs/train"] == train_row["costs/all"] == pytest.approx(judge_cost)
    assert train_row["data/cum/num_unique_scenarios"] == 1 and "throughput/avg_actor_tok_per_s" in train_row
    assert val_row["costs/eval/llm_judge/correctness"] == pytest.approx(judge_cost)
    assert val_row["costs/cum/all"] == pytest.approx(2 * judge_cost)


def test_megatron_topology_is_accepted_with_the_reference_fields_and_says_it_does_nothing() -> None:
    topology = art.MegatronTopologyConfig(tp=2, pp=2, vpp=4)
    assert topology.model_dump() == {"tp": 2, "cp": 1, "ep": 1, "pp": 2, "vpp": 4, "etp": 1}
    with pytest.raises(ValidationError, match="vpp"):
        art.MegatronTopologyConfig(vpp=0)
    with pytest.warns(UserWarning, match="megatron_topology.*no effect"):
        config = art.TrainSFTConfig(learning_rate=1e-4, megatron_topology=topology)
    assert config.megatron_topology == topology
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        art.TrainSFTConfig()  # no topology: quiet


def test_more_small_names_of_the_reference() -> None:
    from art.errors import ARTError, ForbiddenBucketCreationError, LoRADeploymentTimedOutError
    from art.rewards.ruler import Response
    from art.trajectories import get_messages
    from art.utils import s3
    from art.utils.sft import resolve_sft_batch_size

    assert s3.ForbiddenBucketCreationError is ForbiddenBucketCreationError
    error = ForbiddenBucketCreationError("bucket 'x' is taken")
    assert isinstance(error, ARTError) and (error.status_code, error.detail) == (403, "bucket 'x' is taken")
    assert LoRADeploymentTimedOutError("slow").status_code == 504

    answer = Response.model_validate_json(
        '{"scores": [{"trajectory_id": "1", "explanation": "reached it", "score": 0.75}]}'
    )
    assert answer.scores[0].trajectory_id == "1" and answer.scores[0].score == 0.75

    choice = make_choice("4")
    plain = get_messages([{"role": "user", "content": "2 + 2?"}, choice, {"role": "tool", "content": None}])
    assert plain[1] == {"role": "assistant", "content": "4"}
    assert plain[2]["content"] == ""  # never None: chat templates want a string

    assert resolve_sft_batch_size(batch_size="auto", default_batch_size=8) == 8
    assert resolve_sft_batch_size(batch_size=3, default_batch_size=8) == 3
    with pytest.raises(ValueError, match="batch_size=0"):
        resolve_sft_batch_size(batch_size=0, default_batch_size=8)
