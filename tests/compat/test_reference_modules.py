"""The reference's modules and names that docs/compat.md calls "same", each checked for what it does:
`art.utils.trajectory_migration`, `art.types` aliases, `ServerlessTrainResult`, the deployment's legacy
names, the metrics helpers, tau-bench's defaults and the pipeline trainer's seams."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
from helpers_choices import make_choice

import art

pytest.importorskip("pyarrow")


def _groups() -> list[art.TrajectoryGroup]:
    sampled = art.Trajectory(
        messages_and_choices=[{"role": "user", "content": "hi"}, make_choice(content="hello")],
        reward=1.0,
        logs=["l"],
    )
    return [
        art.TrajectoryGroup(
            [sampled, art.Trajectory(messages_and_choices=[{"role": "user", "content": "x"}])]
        )
    ]


def test_trajectory_migration_converts_our_json_lines_and_the_legacy_helpers_round_trip(
    tmp_path: Path,
) -> None:
    from art.utils.trajectory_logging import read_trajectory_groups_parquet
    from art.utils.trajectory_migration import (
        MigrationResult,
        deserialize_trajectory_groups,
        migrate_all_models,
        migrate_jsonl_to_parquet,
        migrate_model_dir,
        serialize_trajectory_groups,
        trajectory_to_dict,
    )

    storage = art.Model(name="m", project="p", base_path=str(tmp_path)).storage
    path = storage.trajectories_path("train", 3)
    path.parent.mkdir(parents=True)
    path.write_text(
        "\n".join(json.dumps(g.model_dump(mode="json")) for g in _groups()) + "\n"
    )  # ours, lossless
    kept = migrate_jsonl_to_parquet(path, delete_original=False)
    assert (kept.files_migrated, kept.errors, path.exists()) == (1, [], True)
    (group,) = read_trajectory_groups_parquet(path.with_suffix(".parquet"))
    assert [t.reward for t in group.trajectories] == [1.0, 0.0] and group.trajectories[0].logs == ["l"]
    assert migrate_jsonl_to_parquet(path, dry_run=True).bytes_after == path.stat().st_size // 25
    bad = path.with_name("0004.jsonl")
    bad.write_text("{not json")
    broken = migrate_jsonl_to_parquet(bad)
    assert (
        broken.files_migrated == 0
        and "0004.jsonl" in broken.errors[0]
        and not bad.with_suffix(".parquet").exists()
    )
    bad.unlink()
    every = migrate_all_models(tmp_path, "p")  # deletes the JSON lines by default, as the reference
    assert every.files_migrated == 1 and not path.exists()
    assert migrate_model_dir(tmp_path / "nowhere") == MigrationResult()
    total = MigrationResult(1, 0, 100, 4) + MigrationResult(1, 1, 50, 2)
    assert (total.files_migrated, total.compression_ratio, total.space_saved) == (2, 25.0, 144)
    text = serialize_trajectory_groups(_groups())
    (back,) = deserialize_trajectory_groups(text)
    assert back.trajectories[0].messages_and_choices[1].message.content == "hello"  # the Choice, no logprobs
    assert "logprobs" not in trajectory_to_dict(_groups()[0].trajectories[0])["messages_and_choices"][1]


def test_types_aliases_and_the_serverless_result() -> None:
    from openai.types.chat.chat_completion import Choice

    from art.types import Message, MessageOrChoice, MessagesAndChoices

    assert MessageOrChoice is art.MessageOrChoice and MessagesAndChoices is art.MessagesAndChoices
    assert Message is art.Message and art.types.Choice is Choice
    result = art.ServerlessTrainResult(step=3, metrics={"loss/train": 0.5}, artifact_name="e/p/m:step3")
    assert isinstance(result, art.TrainResult) and result.artifact_name == "e/p/m:step3"


def test_deployment_names() -> None:
    from art.utils.deployment import (
        DeploymentConfig,
        DeploymentResult,
        LoRADeploymentJob,
        LoRADeploymentProvider,
        TogetherDeploymentConfig,
        WandbDeploymentConfig,
    )
    from art.utils.deployment.together import TogetherJobStatus

    assert [p.value for p in LoRADeploymentProvider] == ["together", "wandb"]
    assert issubclass(TogetherDeploymentConfig, DeploymentConfig) and issubclass(
        WandbDeploymentConfig, DeploymentConfig
    )
    assert TogetherDeploymentConfig().wait_for_completion is True
    job = LoRADeploymentJob(
        status=TogetherJobStatus("Complete"), job_id="j", model_name="m", failure_reason=None
    )
    assert job.status == "Complete" and DeploymentResult(inference_model_name="x").inference_model_name == "x"


def test_metrics_helpers() -> None:
    from art.api_costs import CostExtractor, TokenPricing, normalize_model_name, normalize_provider
    from art.costs import compute_sample_costs, compute_train_cost, get_model_pricing, tokens_to_cost
    from art.metrics import is_builder_managed_metric, is_cumulative_metric_key, to_cumulative_metric_key

    assert is_builder_managed_metric("costs/train/judge") and not is_builder_managed_metric("train/loss")
    assert to_cumulative_metric_key("time/step_actor_s") == "time/cum/actor_s"
    assert is_cumulative_metric_key("costs/cum/all") and not is_cumulative_metric_key("costs/all")
    assert normalize_provider(" OpenAI ") == "openai" and normalize_model_name(" gpt-4.1 ") == "gpt-4.1"
    extractor: CostExtractor = lambda response: 1.0  # noqa: E731 - the type is a callable's
    assert extractor(None) == 1.0 and TokenPricing(1.0, 2.0).completion_per_million == 2.0
    assert tokens_to_cost(2_000_000, 0.5) == pytest.approx(1.0)
    pricing = get_model_pricing("openai/gpt-oss-20b")
    assert pricing is not None
    assert compute_sample_costs(
        prompt_tokens=1_000, completion_tokens=2_000, cost_context="train", pricing=pricing
    ) == {
        "costs/train/tinker_prefill": pytest.approx(0.00012),
        "costs/train/tinker_sample": pytest.approx(0.0006),
    }
    assert compute_train_cost(1_000_000, pricing) == pytest.approx(0.36)


def test_tau_bench_defaults(monkeypatch: pytest.MonkeyPatch) -> None:
    import importlib

    client_module = importlib.import_module("art.tau_bench.client")
    from art.tau_bench import TauBenchClient, default_user_llm_args

    monkeypatch.setenv("ANTHROPIC_API_KEY", "ak")
    assert default_user_llm_args("claude-sonnet") == {"temperature": 0.0, "api_key": "ak"}
    monkeypatch.setattr(client_module, "default_client", None)
    made = client_module._get_default_client()
    assert isinstance(made, TauBenchClient) and client_module._get_default_client() is made  # made once
    asyncio.run(made.close())


async def test_pipeline_trainer_seams_take_plain_groups(fake_backend: object, tmp_path: Path) -> None:
    from art.pipeline_trainer.trainer import PipelineTrainer

    model = art.TrainableModel(name="seams", project="p", base_model="b", base_path=str(tmp_path))
    trainer = PipelineTrainer(
        model, fake_backend, lambda *a: asyncio.sleep(0), [], {}, min_batch_size=1, max_batch_size=2
    )  # type: ignore[arg-type]
    trainer._output_queue = asyncio.Queue()
    groups = [art.TrajectoryGroup([art.Trajectory(reward=r) for r in (0.0, 1.0)]) for _ in range(3)]
    for group in [*groups, None]:
        await trainer._output_queue.put(group)
    assert trainer._queue is trainer._output_queue
    assert await trainer._collect_batch(current_step=0) == (groups[:2], 0, False)
    assert await trainer._collect_batch(current_step=0) == (groups[2:], 0, True)


def test_more_names_compat_md_calls_same() -> None:
    """Names of compat.md's "same" rows that other tests only reach through their callers."""
    import typing

    from art.dev import BackendModelConfig, TrainerArgs
    from art.errors import UnsupportedLoRADeploymentProviderError
    from art.gather import GatherContext, record_metrics
    from art.guided_completion import freeze_tool_schema
    from art.pipeline_trainer import (
        CHECKPOINT_CREATED_AT_METRIC,
        CHECKPOINT_EVAL_COMPLETED_METRIC,
        CHECKPOINT_SAVED_METRIC,
        CheckpointInfo,
        CheckpointRetentionStrategy,
        EvalFn,
        RolloutFn,
        ScenarioT,
        SingleRolloutFn,
        StatusReporter,
    )
    from art.rewards.ruler import TrajectoryScore
    from art.utils.output_dirs import get_default_art_path, get_trajectories_dir
    from art.utils.s3 import ExcludableOption

    failure = art.PydanticException.from_exception(ValueError("boom"))
    assert (failure.type, failure.message) == ("ValueError", "boom")
    context = GatherContext(max_exceptions=0)
    record_metrics(context, art.Trajectory(reward=0.5, metrics={"turns": 2}))
    assert context.metric_sums["reward"] == 0.5 and context.metric_sums["turns"] == 2
    assert TrajectoryScore(trajectory_id="1", explanation="ok", score=0.7).score == 0.7
    assert TrainerArgs(learning_rate=1e-5) == {"learning_rate": 1e-5}
    assert BackendModelConfig(lora_config={"rank": 8}) == {"lora_config": {"rank": 8}}
    assert art.DatasetBatch(items=[1], step=0, epoch=0, epoch_step=0).items == [1]
    assert UnsupportedLoRADeploymentProviderError("x").status_code == 400
    tool = {
        "type": "function",
        "function": {"name": "f", "parameters": {"type": "object", "properties": {"a": {}}}},
    }
    frozen = freeze_tool_schema(tool, {"a": 3})
    assert frozen["function"]["parameters"]["properties"]["a"] == {"const": 3}
    assert get_default_art_path().endswith(".art") and get_trajectories_dir("/m") == "/m/trajectories"
    assert typing.get_args(ExcludableOption) == ("checkpoints", "logs", "trajectories")
    assert (CHECKPOINT_SAVED_METRIC, CHECKPOINT_CREATED_AT_METRIC, CHECKPOINT_EVAL_COMPLETED_METRIC) == (
        "checkpoint/saved", "checkpoint/created_at_unix", "checkpoint/eval_completed",
    )  # fmt: skip
    assert {"step", "path", "created_at", "is_eval_step", "metrics"} <= set(
        vars(CheckpointInfo)["__annotations__"]
    )
    assert all(
        x is not None
        for x in (CheckpointRetentionStrategy, EvalFn, RolloutFn, ScenarioT, SingleRolloutFn, StatusReporter)
    )


async def test_more_compat_md_statements_no_other_test_checked(fake_backend: object, tmp_path: Path) -> None:
    """Statements of compat.md that no other test reached: history sections kept as the reference's
    (`offpolicy/`, `pipeline/`), `delete_checkpoints(higher_is_better=False)`, `TrainConfig` refusing the
    reference's extra fields, `MODEL_PRICING` holding the reference's prices, `ServerlessBackend`'s
    `_prepare_backend_for_training`."""
    from pydantic import ValidationError

    from art.costs import MODEL_PRICING, build_cost_calculator, get_model_pricing
    from art.serverless import ServerlessBackend

    model = art.TrainableModel(name="claims", project="p", base_model="b", base_path=str(tmp_path))
    await model.register(fake_backend)
    await model.log(metrics={"offpolicy/steps": 1.0, "pipeline/queue": 2.0, "other/x": 3.0}, split="train")
    row = model.history()[-1]
    assert row["offpolicy/steps"] == 1.0 and row["pipeline/queue"] == 2.0 and row["train/other/x"] == 3.0

    for loss in (0.5, 0.1, 0.9):  # steps 1..3; lower is better: step 2 is the best
        await model.train([art.TrajectoryGroup([art.Trajectory(messages_and_choices=[
            {"role": "user", "content": "q"}, make_choice(content="a")], reward=r) for r in (0.0, 1.0)])])  # fmt: skip
        await model.log(metrics={"loss": loss})
    assert await model.delete_checkpoints("val/loss", higher_is_better=False) == [2, 3]

    for field in ("kl_penalty_source", "grad_accumulation_sequences"):
        with pytest.raises(ValidationError, match=field):
            art.TrainConfig(**{field: 1})

    assert MODEL_PRICING and get_model_pricing("Qwen/Qwen3.5-4B") is MODEL_PRICING["Qwen/Qwen3.5-4B"]
    costs = build_cost_calculator(MODEL_PRICING["Qwen/Qwen3.5-4B"])(1_000_000, 0, "train")
    assert costs["costs/train/tinker_prefill"] == pytest.approx(MODEL_PRICING["Qwen/Qwen3.5-4B"].prefill)

    backend = ServerlessBackend(api_key="k", base_url="http://127.0.0.1:9/v1")
    # the client's base URL, with the trailing slash openai's client (the reference's) gives it
    assert await backend._prepare_backend_for_training(model) == ("http://127.0.0.1:9/v1/", "k")
    await backend.close()
