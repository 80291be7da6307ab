"""The reference's `art.dev` helpers for GPU layouts and vLLM settings: same rules, same results, and a
layout the reference refuses is refused at `register` before any model loads."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import art
from art.dev import get_openai_server_config, is_dedicated_mode, validate_dedicated_config


@pytest.mark.parametrize(
    "config",
    [
        {},
        {"trainer_gpu_ids": [0], "inference_gpu_ids": [1]},
        {"trainer_gpu_ids": [0, 1], "inference_gpu_ids": [2], "rollout_weights_mode": "merged"},
        {"rollout_weights_mode": "lora", "engine_args": {"enable_sleep_mode": True}},
    ],
)
def test_layouts_that_run(config: dict[str, Any]) -> None:
    validate_dedicated_config(config)


@pytest.mark.parametrize(
    ("config", "message"),
    [
        ({"trainer_gpu_ids": [0]}, "must both be set or both unset"),
        ({"inference_gpu_ids": [1]}, "must both be set or both unset"),
        ({"rollout_weights_mode": "full"}, "'lora' or 'merged', got 'full'"),
        ({"rollout_weights_mode": "merged"}, "requires dedicated mode"),
        ({"init_args": {"fast_inference": True}}, "fast_inference is no longer supported"),
        ({"trainer_gpu_ids": [], "inference_gpu_ids": [1]}, "trainer_gpu_ids must be non-empty"),
        ({"trainer_gpu_ids": [0], "inference_gpu_ids": []}, "inference_gpu_ids must be non-empty"),
        ({"trainer_gpu_ids": [0, 1], "inference_gpu_ids": [1]}, r"must not overlap \(both have \[1\]\)"),
        ({"trainer_gpu_ids": [0], "inference_gpu_ids": [1, 2]}, "Multi-GPU inference not yet supported"),
        ({"trainer_gpu_ids": [1], "inference_gpu_ids": [0]}, "must start at GPU 0"),
        ({"trainer_gpu_ids": [0, 2], "inference_gpu_ids": [1]}, "must be contiguous starting from 0"),
        (
            {"trainer_gpu_ids": [0], "inference_gpu_ids": [1], "engine_args": {"enable_sleep_mode": True}},
            "enable_sleep_mode is incompatible with dedicated mode",
        ),
    ],
)
def test_layouts_the_reference_refuses(config: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        validate_dedicated_config(config)


def test_dedicated_mode_means_both_gpu_lists() -> None:
    assert is_dedicated_mode(art.dev.InternalModelConfig(trainer_gpu_ids=[0], inference_gpu_ids=[1]))
    assert not is_dedicated_mode(art.dev.InternalModelConfig(trainer_gpu_ids=[0]))
    assert not is_dedicated_mode({})


async def test_register_refuses_a_bad_layout_before_loading_anything(tmp_path: Path) -> None:
    unloadable = tmp_path / "unloadable-model"  # passes the base-model check; loading it would fail otherwise
    unloadable.mkdir()
    (unloadable / "config.json").write_text('{"model_type": "no-such-architecture"}')
    model = art.TrainableModel(
        name="m",
        project="p",
        base_model=str(unloadable),
        base_path=str(tmp_path),
        _internal_config=art.dev.InternalModelConfig(trainer_gpu_ids=[0, 1], inference_gpu_ids=[1]),
    )
    async with art.LocalBackend(progress=False) as backend:
        with pytest.raises(ValueError, match="trainer_gpu_ids and inference_gpu_ids must not overlap"):
            await model.register(backend)


def test_openai_server_config_for_a_checkpoint_and_for_the_base_model() -> None:
    with_adapter = get_openai_server_config("agent", "org/base", "/logs/v.log", "/r/checkpoints/0012")
    server = with_adapter["server_args"]
    assert [json.loads(m) for m in server["lora_modules"] or []] == [
        {"name": "agent@12", "path": "/r/checkpoints/0012"}
    ]
    assert (server["api_key"], server["tool_call_parser"], server["return_tokens_as_token_ids"]) == (
        "default",
        "hermes",
        True,
    )
    assert with_adapter["engine_args"] == {
        "model": "org/base",
        "served_model_name": "org/base",  # the bare name never routes to a stale adapter
        "generation_config": "vllm",
    }
    assert with_adapter["log_file"] == "/logs/v.log"

    base_only = get_openai_server_config(
        "agent",
        "org/base",
        "/logs/v.log",
        config=art.dev.OpenAIServerConfig(
            log_file="/elsewhere.log",
            server_args=art.dev.ServerArgs(api_key="k", port=9000),
            engine_args=art.dev.EngineArgs(max_model_len=4096),
        ),
    )
    assert base_only["server_args"]["lora_modules"] is None
    assert (base_only["server_args"]["api_key"], base_only["server_args"]["port"]) == ("k", 9000)
    assert base_only["engine_args"]["served_model_name"] == "agent"
    assert base_only["engine_args"]["max_model_len"] == 4096
    assert base_only["log_file"] == "/elsewhere.log"


def test_tinker_settings_build_and_say_they_do_nothing_here() -> None:
    args = art.dev.TinkerArgs(
        renderer_name="qwen3", training_client_args=art.dev.TinkerTrainingClientArgs(rank=8, seed=1)
    )
    assert args == {"renderer_name": "qwen3", "training_client_args": {"rank": 8, "seed": 1}}
    assert art.dev.TinkerNativeArgs(renderer_name="llama3")["renderer_name"] == "llama3"
    model = art.TrainableModel(
        name="m",
        project="p",
        base_model="tiny",
        _internal_config=art.dev.InternalModelConfig(tinker_args=args),
    )
    with pytest.warns(UserWarning, match="tinker_args"):
        art.LocalBackend()._options_for(model)


def test_get_model_config_has_the_reference_shape_defaults_and_overrides(tmp_path: Path) -> None:
    from art.dev.get_model_config import default_target_modules, get_model_config

    shared = get_model_config("Qwen/Qwen2.5-0.5B-Instruct", str(tmp_path), None)
    assert shared["engine_args"]["enable_sleep_mode"] is True and shared["rollout_weights_mode"] == "lora"
    assert shared["init_args"]["model_name"] == "Qwen/Qwen2.5-0.5B-Instruct"
    assert shared["lora_config"]["target_modules"] == default_target_modules("any/dense-model")
    assert "experts" in default_target_modules("Qwen/Qwen3.5-35B-A3B")
    assert "in_proj_qkv" in default_target_modules("Qwen/Qwen3.5-4B")
    dedicated = get_model_config(
        "m",
        str(tmp_path),
        {"trainer_gpu_ids": [0], "inference_gpu_ids": [1], "engine_args": {"max_model_len": 4096}},
        lora_config={"target_modules": ["q_proj"]},
    )
    assert dedicated["engine_args"]["enable_sleep_mode"] is False
    assert dedicated["engine_args"]["max_model_len"] == 4096
    assert (
        dedicated["lora_config"]["target_modules"]
        == ["q_proj"]
        == dedicated["engine_args"]["lora_target_modules"]
    )  # type: ignore[typeddict-item]
    assert dedicated["trainer_gpu_ids"] == [0]
    # a model folder with checkpoints: the newest is what loads
    model = art.TrainableModel(name="m", project="p", base_model="x", base_path=str(tmp_path))
    for step in (1, 3):
        folder = model.storage.new_checkpoint_tmp_dir(step)
        (folder / "adapter_config.json").write_text("{}")
        model.storage.commit_checkpoint(folder, step, {})
    resumed = get_model_config("x", str(model.storage.root), None)
    assert resumed["init_args"]["model_name"].endswith("checkpoints/0003")
    with pytest.raises(ValueError, match=r"TrainableModel\(lora_config"):
        get_model_config("x", "", {"peft_args": {"r": 4}})  # type: ignore[typeddict-unknown-key]
