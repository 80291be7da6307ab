"""The reference's per-model settings: `InternalModelConfig` and its parts, and the dict form of
`LoRAConfig` (`TrainableModel(lora_config=art.dev.LoRAConfig(rank=16))` works: `rank` is our `r`)."""

from __future__ import annotations

from typing import Any, Literal, NoReturn, Required

from typing_extensions import TypedDict

from art.dev.engine import EngineArgs


class InitArgs(TypedDict, total=False):
    """Arguments of the reference's model loading (Unsloth). Applied here: `max_seq_length` (the context
    window) and `dtype`."""

    model_name: str
    max_seq_length: int
    dtype: str | None
    load_in_4bit: bool
    load_in_8bit: bool
    load_in_16bit: bool
    full_finetuning: bool
    device_map: str
    trust_remote_code: bool
    use_gradient_checkpointing: str
    fast_inference: bool
    gpu_memory_utilization: float
    enable_prefix_caching: bool
    max_lora_rank: int
    random_state: int


class TrainerArgs(TypedDict, total=False):
    """Arguments of the reference's trainer (TRL's GRPO config). None applies here: pass training options
    to `backend.train(...)` instead (learning_rate, max_grad_norm, weight_decay, adam_betas...)."""

    learning_rate: float
    weight_decay: float
    adam_beta1: float
    adam_beta2: float
    adam_epsilon: float
    max_grad_norm: float
    gradient_accumulation_steps: int
    per_device_train_batch_size: int
    lr_scheduler_type: str
    warmup_steps: int
    seed: int
    optim: str
    logging_steps: float
    report_to: str | list[str] | None
    output_dir: str | None


class InternalModelConfig(TypedDict, total=False):
    """Per-model engine and trainer settings (`TrainableModel(_internal_config=...)`). See
    `art.backends.internal_config` for what applies here."""

    init_args: InitArgs
    engine_args: EngineArgs
    trainer_args: TrainerArgs
    trainer_gpu_ids: list[int]
    inference_gpu_ids: list[int]
    rollout_weights_mode: Literal["lora", "merged"]
    chat_template_kwargs: dict[str, object]
    chat_template: str
    chat_template_path: str
    chat_template_content_format: str
    chat_template_tool_schema_format: Literal["default", "vllm_openai"]
    megatron_topology: dict[str, int | None]
    allow_unvalidated_arch: bool
    tinker_args: TinkerArgs
    tinker_native_args: TinkerNativeArgs


class TinkerTrainingClientArgs(TypedDict, total=False):
    """Arguments of a Tinker training client (the reference's Tinker backend; there is none here)."""

    rank: int
    seed: int | None
    train_mlp: bool
    train_attn: bool
    train_unembed: bool
    user_metadata: dict[str, str] | None


class TinkerArgs(TypedDict, total=False):
    """`InternalModelConfig(tinker_args=...)` for the reference's Tinker backend. No Tinker backend
    exists here: a `LocalBackend` warns that `tinker_args` has no effect."""

    renderer_name: Required[str]
    training_client_args: TinkerTrainingClientArgs


class TinkerNativeArgs(TypedDict, total=False):
    """`InternalModelConfig(tinker_native_args=...)` for the reference's native Tinker backend (none here)."""

    renderer_name: Required[str]
    training_client_args: TinkerTrainingClientArgs


class LoRAConfig(TypedDict, total=False):
    """The adapter's settings as the reference writes them. `rank`, `alpha`, `dropout` and
    `target_modules` apply (`art.LoRAConfig`); the PEFT/Unsloth-only keys are dropped with a warning."""

    rank: int
    alpha: int
    dropout: float
    target_modules: list[str]
    bias: str
    use_rslora: bool
    layers_to_transform: list[int] | None
    modules_to_save: list[str] | None
    init_weights: bool
    random_state: int


class BackendModelConfig(InternalModelConfig, total=False):
    """`InternalModelConfig` with the adapter's settings."""

    lora_config: LoRAConfig


def PeftArgs(*_: Any, **__: Any) -> NoReturn:
    """Removed in the reference too: raises with the way to migrate."""
    raise ValueError(
        "`peft_args` was replaced by TrainableModel(lora_config=...): rename r->rank, lora_alpha->alpha, "
        "lora_dropout->dropout (or use art.LoRAConfig(r=..., alpha=..., dropout=..., target_modules=...))"
    )
