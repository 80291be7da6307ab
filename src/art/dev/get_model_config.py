"""`get_model_config`: the reference's full per-model settings, defaults and user settings merged
(`art.dev.get_model_config`, the same name and signature).

The reference's backends start Unsloth, vLLM and TRL from this dict. Ours start from their own options
(`art.RuntimeOptions`; `art.backends.internal_config` applies the keys of `_internal_config` that mean
something here), so this module is for code that reads or prints the settings: the result has the
reference's shape and defaults (4-bit loading, a 32k context, sleep mode unless the GPUs are dedicated,
the LoRA target modules the reference uses for the model's family, its trainer defaults), the user's
`config` merged on top, and the newest checkpoint under `output_dir` as the model to load.

    config = get_model_config("Qwen/Qwen3-4B-Instruct-2507", ".art/p/models/m", model._internal_config)
    config["lora_config"]["target_modules"]  # ['q_proj', 'k_proj', ..., 'down_proj']
"""

from __future__ import annotations

from typing import cast

from art.dev.engine import EngineArgs
from art.dev.model import BackendModelConfig, InitArgs, InternalModelConfig, LoRAConfig, PeftArgs, TrainerArgs
from art.dev.validate import is_dedicated_mode
from art.record.storage import usable_checkpoint_steps
from art.types import DEFAULT_LEARNING_RATE

_ATTENTION_AND_MLP = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]
# Qwen3.5/3.6 mix full attention with gated linear attention (`in_proj_qkv`, `in_proj_z`, `out_proj`).
_QWEN3_5_LINEAR_ATTENTION = ["in_proj_qkv", "in_proj_z", "out_proj"]
_QWEN3_MOE = {
    "Qwen/Qwen3-30B-A3B",
    "Qwen/Qwen3-30B-A3B-Base",
    "Qwen/Qwen3-30B-A3B-Instruct-2507",
    "Qwen/Qwen3-235B-A22B-Instruct-2507",
}
_QWEN3_5_DENSE = {"Qwen/Qwen3.5-4B", "Qwen/Qwen3.5-27B", "Qwen/Qwen3.6-27B"}
_QWEN3_5_MOE = {"Qwen/Qwen3.5-35B-A3B", "Qwen/Qwen3.5-397B-A17B", "Qwen/Qwen3.6-35B-A3B"}


def default_target_modules(base_model: str) -> list[str]:
    """The LoRA target modules the reference uses for `base_model`'s family: attention and MLP
    projections, plus the linear-attention projections of Qwen3.5/3.6 and the experts of MoE models.

    Example:
        >>> default_target_modules("Qwen/Qwen3-30B-A3B")[-1]
        'experts'
    """
    if base_model in _QWEN3_5_MOE:
        return [*_ATTENTION_AND_MLP[:4], *_QWEN3_5_LINEAR_ATTENTION, "experts", *_ATTENTION_AND_MLP[4:]]
    if base_model in _QWEN3_5_DENSE:
        return [*_ATTENTION_AND_MLP[:4], *_QWEN3_5_LINEAR_ATTENTION, *_ATTENTION_AND_MLP[4:]]
    if base_model in _QWEN3_MOE:
        return [*_ATTENTION_AND_MLP, "experts"]
    return list(_ATTENTION_AND_MLP)


def get_model_config(
    base_model: str,
    output_dir: str,
    config: InternalModelConfig | None,
    lora_config: LoRAConfig | None = None,
) -> BackendModelConfig:
    """The model's settings as the reference's backends use them (see the module docstring).

    `config` (the model's `_internal_config`) is merged over the defaults: `engine_args`, `init_args` and
    `trainer_args` key by key, the GPU ids, `megatron_topology` and `allow_unvalidated_arch` as given.
    `lora_config` overrides the default adapter settings. A `peft_args` key is refused with the migration.
    """
    config = config if config is not None else InternalModelConfig()
    if "peft_args" in config:
        PeftArgs()  # raises, saying how to migrate to TrainableModel(lora_config=...)
    user_engine = dict(config.get("engine_args") or {})
    mode = config.get("rollout_weights_mode", "lora")
    init_args = InitArgs(load_in_4bit=True, max_seq_length=32768, model_name=base_model)
    init_args.update(config.get("init_args") or {})
    steps = usable_checkpoint_steps(output_dir) if output_dir else []
    if steps:  # resume: load the newest checkpoint
        init_args["model_name"] = f"{output_dir}/checkpoints/{steps[-1]:04d}"
    engine_args = EngineArgs(
        allowed_local_media_path="/tmp",  # type: ignore[typeddict-unknown-key]
        enable_sleep_mode=False
        if is_dedicated_mode(config)
        else bool(user_engine.get("enable_sleep_mode", True)),
        generation_config="vllm",
        model=base_model,
    )
    engine_args.update(cast(EngineArgs, user_engine))
    if is_dedicated_mode(config):  # dedicated GPUs never sleep, whatever was asked
        engine_args["enable_sleep_mode"] = False
    lora = LoRAConfig(target_modules=default_target_modules(base_model), random_state=3407)
    lora["use_gradient_checkpointing"] = "unsloth"  # type: ignore[typeddict-unknown-key]
    lora.update(lora_config or {})
    if mode == "lora" and "lora_target_modules" not in user_engine:
        engine_args["lora_target_modules"] = list(lora["target_modules"])  # type: ignore[typeddict-unknown-key]
    trainer_args = TrainerArgs(
        adam_beta1=0.9,
        adam_beta2=0.99,
        gradient_accumulation_steps=1,
        learning_rate=DEFAULT_LEARNING_RATE,
        logging_steps=1,
        lr_scheduler_type="constant",
        max_grad_norm=0.1,
        optim="paged_adamw_8bit",
        output_dir=output_dir,
        per_device_train_batch_size=2,
        report_to="none",
        weight_decay=0.1,
    )
    trainer_args.update(config.get("trainer_args") or {})
    result = BackendModelConfig(
        init_args=init_args,
        engine_args=engine_args,
        lora_config=lora,
        rollout_weights_mode=mode,
        trainer_args=trainer_args,
    )
    if "tinker_args" in config:
        result["tinker_args"] = config["tinker_args"]
    for key in ("allow_unvalidated_arch", "trainer_gpu_ids", "inference_gpu_ids", "megatron_topology"):
        if key in config:
            result[key] = config[key]
    return result


__all__ = ["default_target_modules", "get_model_config"]
