"""Configuration and result types that cross the client/service boundary (pydantic v2).

Defaults live here and nowhere else. `TrainConfig` is the original API's per-step config;
`TrainSpec` is the full set of per-step training parameters that `Backend.train(...)` accepts as keyword
arguments and that the service receives (locally or over HTTP). `TrainSFTConfig` and `SFTSpec` are the same
pair for supervised fine-tuning (`model.train_sft`, `Backend.train_sft`). `RuntimeOptions` are the service's
switches (device, engine and their speed-ups), given once to the backend and passed down from there.
"""

from __future__ import annotations

import re
import warnings
from collections.abc import Callable, Mapping
from typing import Annotated, Any, Literal, get_args

# The reference keeps its message aliases in `art.types` (`from art.types import MessageOrChoice`); they are
# the same objects as `art.trajectories`' (and `art.Messages`, `art.Tools`, ...).
from openai.types.chat.chat_completion import Choice as Choice
from pydantic import (
    AfterValidator,
    AliasChoices,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)

from art.common.engine_traits import EngineName as EngineName
from art.common.env import ENV_VARS
from art.common.env import read as read_env
from art.common.readable import ReadableModel
from art.common.scale_checks import check_scale_options
from art.record.step_record import StepTrainerRecord
from art.trajectories import Message as Message
from art.trajectories import MessageOrChoice as MessageOrChoice
from art.trajectories import Messages as Messages
from art.trajectories import MessagesAndChoices as MessagesAndChoices
from art.trajectories import Tools as Tools

LossFn = Literal["cispo", "ppo"]
"""The policy losses (art.training.losses has a function of each name; docs/design.md, "What flows" 5)."""
LOSS_CLIP_DEFAULTS: dict[str, tuple[float, float | None]] = {"cispo": (1.0, 4.0), "ppo": (0.2, None)}
"""Per loss, its (epsilon, epsilon_high) defaults; None: epsilon_high defaults to epsilon."""
LOSS_FNS: tuple[str, ...] = get_args(LossFn)
LOSS_FN_CHOICES = " or ".join(repr(name) for name in LOSS_FNS)  # "'cispo' or 'ppo'", for error messages
DEFAULT_LOSS_FN: LossFn = "cispo"
DEFAULT_LEARNING_RATE = 5e-6
"""A step's AdamW learning rate when none is given (TrainConfig, TrainSpec, the reference's dev config)."""
PIPELINE_LEARNING_RATE = 1e-5
"""The reference's `PipelineTrainer(learning_rate=...)` default (art.recipes.pipeline_trainer)."""
RULER_LOOP_LEARNING_RATE = 1e-4
"""The zero-data loop's and `art autorl`'s default: a few RULER-judged steps on a small model."""
DEFAULT_SFT_LEARNING_RATE = 5e-5
"""`TrainSFTConfig`'s learning rate when none is given."""
SFT_PEAK_LEARNING_RATE = 2e-4
"""The peak of the reference's SFT schedule (`art.utils.sft`, `art sft --peak-lr`)."""
ImportanceSamplingLevel = Literal["token", "sequence", "average", "geometric_average"]
Split = str  # "train", "val", or any name of the user's; validated as a path-safe name by storage


DEFAULT_MAX_STEP_KL = 0.3
"""The trust region's bound on one RL update (`TrainSpec.max_step_kl`), in nats a trained token: far above
what a healthy step moves a real model (~0.001-0.05), far below the single-step collapse it stops (~5.7 on the
RL learning test at twice its rate; `art.training.trust_region`)."""
MAX_LEARNING_RATE = 1.0
"""The largest learning rate a step accepts: beyond it AdamW moves a weight by more than its own size."""
MAX_WEIGHT_DECAY = 1.0
"""The largest weight decay accepted: with learning rates <= 1, AdamW's decay (w -= lr * wd * w) then never
flips a weight's sign."""


def check_adam_betas(value: tuple[float, float]) -> tuple[float, float]:
    """Refuse AdamW betas outside [0, 1) (the moving averages would grow without bound)."""
    for i, beta in enumerate(value):
        if not 0 <= beta < 1:
            raise ValueError(f"adam_betas[{i}] must be in [0, 1), got {beta!r}")
    return value


class TrainConfig(ReadableModel):
    """Per-step config of the original API: `await model.train(groups, config=TrainConfig(...))`.

    Example:
        >>> art.TrainConfig(learning_rate=1e-5)
        TrainConfig(learning_rate=1e-05, kl_penalty_coef=0.0)
    """

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    learning_rate: float = Field(
        default=DEFAULT_LEARNING_RATE,
        gt=0,
        le=MAX_LEARNING_RATE,
        description="AdamW learning rate for this step.",
    )
    kl_penalty_coef: float = Field(
        default=0.0, ge=0, description="Weight of the KL penalty to the base model (adapter disabled)."
    )


# Keys of the reference's `art.dev.LoRAConfig` (a TypedDict) that have no counterpart here: accepted with a
# warning, so a config written for the reference loads; `rank` is our `r`.
_REFERENCE_ONLY_LORA_KEYS = (
    "bias",
    "layers_to_transform",
    "layers_pattern",
    "use_gradient_checkpointing",
    "random_state",
    "max_seq_length",
    "use_rslora",
    "modules_to_save",
    "init_weights",
    "loftq_config",
    "temporary_location",
)


class LoRAConfig(ReadableModel):
    """The LoRA adapter that training updates. Defaults follow the reference system.

    Also accepts the reference's `art.dev.LoRAConfig` dict: `rank` is `r`, and its Unsloth/PEFT-only keys
    (`bias`, `use_rslora`, ...) are dropped with a warning naming them.

    Example:
        >>> art.LoRAConfig(r=16, alpha=32).r
        16
    """

    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    r: int = Field(default=8, ge=1, validation_alias=AliasChoices("r", "rank"))
    alpha: int = Field(default=16, ge=1)
    dropout: float = Field(default=0.0, ge=0, lt=1)
    target_modules: list[str] = Field(
        default_factory=lambda: ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]
    )

    @model_validator(mode="before")
    @classmethod
    def _drop_reference_only_keys(cls, data: Any) -> Any:
        if isinstance(data, dict):
            dropped = sorted(k for k in data if k in _REFERENCE_ONLY_LORA_KEYS)
            if dropped:
                warnings.warn(
                    f"LoRAConfig: {', '.join(dropped)} (from the reference's art.dev.LoRAConfig) have no effect "
                    "here and were ignored; the adapter uses r (rank), alpha, dropout and target_modules",
                    stacklevel=2,
                )
                data = {k: v for k, v in data.items() if k not in _REFERENCE_ONLY_LORA_KEYS}
        return data


class TrainSpec(ReadableModel):
    """Everything one training step needs besides the groups; `Backend.train` keyword arguments.

    Example:
        >>> art.TrainSpec(learning_rate=1e-5, loss_fn="ppo").loss_fn
        'ppo'
    """

    # Every number finite and in its range, checked when the step is asked for (a 4xx over HTTP), not in
    # the middle of training: 1e308, inf or betas of 2 would train a step into nonsense.
    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    learning_rate: float = Field(default=DEFAULT_LEARNING_RATE, gt=0, le=MAX_LEARNING_RATE)
    loss_fn: LossFn = DEFAULT_LOSS_FN
    epsilon: float | None = Field(
        default=None, gt=0, description="Lower clip; default 1.0 for cispo, 0.2 for ppo."
    )
    epsilon_high: float | None = Field(
        default=None, gt=0, description="Upper clip; default 4.0 for cispo, epsilon for ppo."
    )
    importance_sampling_level: ImportanceSamplingLevel = "token"
    kl_penalty_coef: float = Field(default=0.0, ge=0)
    scale_rewards: bool = True
    allow_training_without_logprobs: bool = Field(
        default=False,
        description="Also train assistant turns that carry no sampled logprobs (message dicts, Choices "
        "without logprobs), as the reference does: their tokens are the template's rendering and their "
        "importance ratio is 1 (on-policy). Off: such turns are context.",
    )
    max_grad_norm: float = Field(default=1.0, gt=0)
    max_step_kl: float | None = Field(
        default=DEFAULT_MAX_STEP_KL,
        gt=0,
        description="Trust region of one RL update: its KL on the step's own tokens (nats a token, on an "
        "eighth of the sequences); above it the update is scaled back toward the previous adapter "
        "(`art.training.trust_region`). None: no check (one forward pass over that eighth saved).",
    )
    weight_decay: float = Field(default=0.1, ge=0, le=MAX_WEIGHT_DECAY)
    adam_betas: Annotated[tuple[float, float], AfterValidator(check_adam_betas)] = (0.9, 0.99)
    max_seq_len: int = Field(default=4096, ge=8, description="Longer sequences are reported and dropped.")
    micro_batch_tokens: int = Field(
        default=4096, ge=8, description="Token budget of one forward/backward micro-batch."
    )

    def clip_range(self) -> tuple[float, float]:
        """(epsilon, epsilon_high) with the loss function's defaults filled in."""
        default_low, default_high = LOSS_CLIP_DEFAULTS[self.loss_fn]
        low = default_low if self.epsilon is None else self.epsilon
        high = self.epsilon_high if self.epsilon_high is not None else (default_high or low)
        return low, high


def _null_as_nan(value: Any) -> Any:
    """Metrics as JSON may hold null for a NaN (JSON has no NaN): read it as NaN."""
    if isinstance(value, dict):
        return {k: float("nan") if v is None else v for k, v in value.items()}
    return value


class TrainResult(ReadableModel):
    """What one training step returns: the new step number and its metrics (the reference's names where it
    has one: `loss/train`, `loss/grad_norm`, `data/step_num_groups_trainable`, ...; ours for the rest).

    Example:
        result = await model.train(groups, config=art.TrainConfig(learning_rate=1e-5))
        print(result.step, result.metrics["loss/train"])
    """

    # A NaN or infinite metric (a diverged loss) is written as "NaN"/"Infinity" in JSON, which reads back as
    # the same float; JSON null (what older servers wrote) reads as NaN. So no record or reply loses a step.
    model_config = ConfigDict(ser_json_inf_nan="strings")

    step: int
    metrics: Annotated[dict[str, float], BeforeValidator(_null_as_nan)] = Field(default_factory=dict)
    message: str | None = Field(
        default=None, description="Plain-language note, e.g. why nothing was trainable in this step."
    )
    checkpoint_path: str | None = Field(
        default=None, description="The folder of checkpoint `step` (a PEFT adapter), when it is on disk."
    )
    trainer_record: StepTrainerRecord | None = Field(
        default=None,
        repr=False,
        description="What the trainer saw (advantages, per-token logprobs and ratios); the backend writes it "
        "into the record beside the step's trajectories (`art.record.step_record`).",
    )


class ServerlessTrainResult(TrainResult):
    """`ServerlessBackend.train`'s result (the reference's name): `TrainResult` plus `artifact_name`, the
    step's name on the service (`{entity}/{project}/{name}:step{N}`).

    Example:
        result = await art.serverless.ServerlessBackend(api_key=key, base_url=url).train(model, groups)
        print(result.step, result.artifact_name)
    """

    artifact_name: str | None = None


class LocalTrainResult(TrainResult):
    """`LocalBackend.train`'s result (the reference's name); the same fields as `TrainResult`.

    Example:
        result = await art.LocalBackend().train(model, groups, learning_rate=1e-5)
        print(result.step, result.metrics["loss/train"], result.checkpoint_path)
    """


ReleaseMemory = Literal["auto", "always", "never"]
TrainSharding = Literal["ddp", "fsdp2"]
EngineCompile = Literal["auto", "on", "off"]
_DEVICE = re.compile(r"^(auto|cpu|cuda(:\d+)?)$")


class RuntimeOptions(ReadableModel):
    """How the service runs: where, with which engine, and the switches of its speed-ups.

    One object, given to the backend (`LocalBackend(options=...)`, or its keywords) and passed down to the
    service, the engine and the trainer; nothing below reads the environment. The environment variables in
    `ENV_OVERRIDES` still override it, read once when the backend is made (`with_env_overrides`): handy for
    A/B runs of a benchmark without touching code.

    Example:
        backend = LocalBackend(options=art.RuntimeOptions(device="cpu", fold_lora=False))
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    device: str = Field(
        default="auto",
        description='"auto" (a CUDA GPU where there is one, else the CPU), "cpu", "cuda" or "cuda:N".',
    )
    engine: EngineName = Field(
        default="torch",
        description='"torch" (built in; the CPU default) or "vllm" (a vLLM server subprocess).',
    )
    dtype: str | None = Field(
        default=None,
        description='"bfloat16", "float32", ...; None: bf16 where the hardware computes it natively.',
    )
    max_num_seqs: int = Field(default=64, ge=1, description="Sequences the engine decodes together.")
    max_model_len: int | None = Field(
        default=None, ge=16, description="Context window served; None: the model's own."
    )
    seed: int = Field(default=0, description="Seed of the LoRA adapter's initialisation.")
    max_loaded_adapters: int = Field(
        default=4,
        ge=1,
        description="Trained steps kept loaded (the newest always); an older step still on disk loads again "
        "when a request names it.",
    )
    max_rejected_checkpoints: int = Field(
        default=10,
        ge=0,
        description="Checkpoints set aside (failed steps, corrupted ones) kept for debugging under "
        "checkpoints/rejected/; the oldest beyond this number are deleted.",
    )
    canary_tolerance: float | None = Field(
        default=None,
        gt=0,
        description="Mean |logprob difference| allowed between engine and trainer after a step; None: by dtype.",
    )
    # -- the torch engine's speed-ups (each can be turned off to compare or to work around a problem) --
    engine_compile: EngineCompile = Field(
        default="auto",
        description="Compiled decode kernels (C++/inductor): auto (on CPU only), on or off. ART_ENGINE_COMPILE=0/1.",
    )
    fold_lora: bool = Field(
        default=True, description="Fold adapters into the base matmuls for generation. ART_ENGINE_FOLD_LORA."
    )
    share_prefixes: bool = Field(
        default=True,
        description="Compute a prefix the prompts of one prefill share once. ART_ENGINE_SHARE_PREFIXES.",
    )
    native_bf16: bool = Field(
        default=True,
        description="Let the C++ kernels round with AVX-512 BF16's instruction where the CPU has it. ART_NATIVE_BF16.",
    )
    cpu_primitive_cache: int | None = Field(
        default=64,
        ge=1,
        description="Entries in oneDNN's and ideep's matmul caches (each would grow to 1,024 shapes, ~2 GiB): "
        "set in their environment variables when an engine or trainer is made, unless the user set them; "
        "None leaves the libraries' defaults and the environment alone (art.kernels.cpu_env).",
    )
    # -- the trainer's --
    train_compile: bool = Field(
        default=True, description="torch.compile the trainer's element-wise kernels. ART_TRAIN_COMPILE."
    )
    train_cpp_attention: bool = Field(
        default=True,
        description="The trainer's C++ causal attention on CPU (else SDPA). ART_TRAIN_CPP_ATTENTION.",
    )
    train_shared_prefix: bool = Field(
        default=True,
        description="Compute the start that every sequence of a training micro-batch shares (a group's prompt) "
        "once, not once per sequence. ART_TRAIN_SHARED_PREFIX.",
    )
    release_memory: ReleaseMemory = Field(
        default="auto",
        description="Give freed memory back to the OS after a step: auto (when short), always or never. "
        "ART_RELEASE_MEMORY.",
    )
    # -- engine="vllm" (art.engines.vllm): vLLM's OpenAI server in a subprocess --
    vllm_python: str | None = Field(
        default=None,
        description="The Python that has vLLM (e.g. ~/vllm-venv/bin/python); None: this one. ART_VLLM_PYTHON.",
    )
    vllm_args: tuple[str, ...] = Field(
        default=(),
        description='Extra command-line arguments for vLLM\'s server, e.g. ("--enforce-eager",).',
    )
    vllm_gpu_memory_utilization: float | None = Field(
        default=None, gt=0, le=1, description="vLLM's share of its GPU's memory; None: vLLM's default."
    )
    vllm_startup_timeout: float = Field(
        default=1800.0, gt=0, description="Seconds to wait for vLLM's server to answer /health."
    )
    vllm_env: dict[str, str] = Field(
        default_factory=dict,
        description='Extra environment for vLLM\'s server, e.g. {"VLLM_CPU_KVCACHE_SPACE": "2"} (GiB).',
    )
    # -- beyond one device (docs/scale.md) --
    train_ranks: int | None = Field(
        default=None,
        ge=1,
        description="torch.distributed ranks that train each RL step (DDP or FSDP2: train_sharding; gloo on "
        "CPUs, NCCL on GPUs), started and supervised by the service. None: one per trainer_gpu_ids entry, else 1 "
        "(the trainer in this process; nothing is spawned).",
    )
    train_sharding: TrainSharding = Field(
        default="ddp",
        description='How trainer ranks (train_ranks > 1) share the model: "ddp" (the default) gives every rank '
        'the whole base and all-reduces the LoRA gradients once per step; "fsdp2" shards the frozen base and '
        "the adapter across the ranks (torch FSDP2 fully_shard), gathering each layer's weights for every "
        "forward and backward: for a base too big for one device (docs/scale.md). No effect with one rank.",
    )
    trainer_gpu_ids: tuple[int, ...] | None = Field(
        default=None,
        description="Dedicated mode (the reference's name): the CUDA GPUs the trainer ranks use, one rank each.",
    )
    inference_gpu_ids: tuple[int, ...] | None = Field(
        default=None,
        description="Dedicated mode: the CUDA GPUs vLLM serves on (tensor_parallel_size x inference_replicas).",
    )
    tensor_parallel_size: int = Field(
        default=1, ge=1, description="vLLM's --tensor-parallel-size: GPUs one inference replica spans."
    )
    inference_replicas: int = Field(
        default=1,
        ge=1,
        description="Inference engines behind the one endpoint: vLLM's --data-parallel-size, or with "
        "ray_address one Ray actor each.",
    )
    ray_address: str | None = Field(
        default=None,
        description='A Ray cluster ("host:port") to run inference replicas and trainer ranks on as actors '
        "(art.ray.RayBackend, `art serve --ray-address`); needs the `ray` extra.",
    )

    @field_validator("dtype")
    @classmethod
    def _known_dtype(cls, value: str | None) -> str | None:
        if value is None or value.strip().lower() in ("", "auto"):
            return None
        if value.strip().lower() not in DTYPE_NAMES:
            raise ValueError(
                f"dtype={value!r} is not one the engines serve: use {', '.join(sorted(set(DTYPE_NAMES.values())))} "
                "(or None: bf16 where the hardware computes it natively). Both engines, torch and vllm, take all "
                "three; vLLM takes bfloat16 on GPUs of compute capability 8.0 or newer only"
            )
        return value.strip().lower()

    @field_validator("device")
    @classmethod
    def _valid_device(cls, value: str) -> str:
        value = value.strip().lower()
        if not _DEVICE.match(value):
            raise ValueError(f'device={value!r}: use "auto", "cpu", "cuda" or "cuda:N"')
        return value

    @model_validator(mode="after")
    def _valid_scale_out(self) -> RuntimeOptions:
        """Layouts that cannot run, refused when the options are made (before anything loads); the checks
        that need the machine (which GPUs exist) run when the service starts (`art.cluster.placement`)."""
        check_scale_options(self)
        return self

    @property
    def ranks(self) -> int:
        """`train_ranks` resolved: as given, else one per trainer GPU, else 1."""
        if self.train_ranks is not None:
            return self.train_ranks
        return len(self.trainer_gpu_ids) if self.trainer_gpu_ids else 1

    def with_env_overrides(self, environ: Mapping[str, str] | None = None) -> RuntimeOptions:
        """These options with every variable of `ENV_OVERRIDES` that is set applied over them.

        A bad value raises ValueError naming the variable and the values it takes (before anything loads)."""
        changes: dict[str, Any] = {}
        for variable, (field, parse) in ENV_OVERRIDES.items():
            raw = read_env(variable, environ)
            if raw is None:
                continue
            try:
                changes[field] = parse(raw)
            except ValueError as exc:
                raise ValueError(f"{variable}={raw!r}: {exc}") from None
        if not changes:
            return self
        try:
            return self.model_validate({**self.model_dump(), **changes})
        except ValidationError as exc:
            names = ", ".join(k for k, (f, _) in ENV_OVERRIDES.items() if f in changes)
            raise ValueError(f"the environment ({names}) gives invalid runtime options: {exc}") from None


DTYPE_NAMES = {
    "bfloat16": "bfloat16",
    "bf16": "bfloat16",
    "float16": "float16",
    "fp16": "float16",
    "half": "float16",
    "float32": "float32",
    "fp32": "float32",
    "float": "float32",
}
"""The dtype names `RuntimeOptions.dtype` takes, and the dtype each means."""


def _switch(raw: str) -> bool:
    if raw.lower() in ("1", "true", "on", "yes"):
        return True
    if raw.lower() in ("0", "false", "off", "no"):
        return False
    raise ValueError("use 1 or 0")


def _engine_compile(raw: str) -> str:
    table = {"1": "on", "0": "off", "on": "on", "off": "off", "auto": "auto"}
    if raw.lower() not in table:
        raise ValueError("use 1 (on), 0 (off) or auto")
    return table[raw.lower()]


def _release(raw: str) -> str:
    if raw.lower() not in ("auto", "always", "never"):
        raise ValueError("use 'auto' (the default), 'always' or 'never'")
    return raw.lower()


_PARSERS: dict[str, Callable[[str], Any]] = {
    "engine_compile": _engine_compile,
    "fold_lora": _switch,
    "share_prefixes": _switch,
    "native_bf16": _switch,
    "train_compile": _switch,
    "train_cpp_attention": _switch,
    "train_shared_prefix": _switch,
    "release_memory": _release,
}  # any other field: the text as it is
ENV_OVERRIDES: dict[str, tuple[str, Callable[[str], Any]]] = {
    var.name: (var.runtime_option, _PARSERS.get(var.runtime_option, str))
    for var in ENV_VARS.values()
    if var.runtime_option is not None
}
"""Environment variable -> (RuntimeOptions field, parser). Read once, by `RuntimeOptions.with_env_overrides`."""


class MegatronTopologyConfig(BaseModel):
    """How the reference's Megatron backend splits a model over GPUs (the reference's fields): tensor (`tp`),
    context (`cp`), expert (`ep`), pipeline (`pp`), virtual pipeline (`vpp`) and expert tensor (`etp`)
    parallel sizes.

    Accepted so code written for the reference runs here: `TrainSFTConfig(megatron_topology=...)` and
    `backend.train(..., megatron_topology=...)` take it, and warn that it has no effect (there is no
    Megatron backend here; LocalBackend trains on one device). The reference sizes `cp` and `ep` to the
    visible GPUs by default; here they default to 1 (nothing reads them).

    Example:
        >>> art.MegatronTopologyConfig(tp=2).tp
        2
    """

    model_config = ConfigDict(extra="forbid")

    tp: int = Field(default=1, ge=1)
    cp: int = Field(default=1, ge=1)
    ep: int = Field(default=1, ge=1)
    pp: int = Field(default=1, ge=1)
    vpp: int | None = Field(default=None, ge=1)
    etp: int = Field(default=1, ge=1)


class TrainSFTConfig(BaseModel):
    """Config of one `model.train_sft(...)` call (the reference's fields and defaults).

    `learning_rate`: one value for every batch, or one value per batch (a schedule, e.g. from
    `art.utils.sft.create_lr_schedule`; needs an integer `batch_size`). `batch_size`: trajectories per
    optimiser step, or "auto": as many consecutive trajectories as fit in `SFTSpec.batch_tokens` tokens.
    `assistant_turns`: "all" (every assistant turn is trained) or "last" (only each conversation's final
    one; the earlier ones are context).

    Example:
        >>> art.TrainSFTConfig(learning_rate=1e-4, batch_size=4).batch_size
        4
    """

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    learning_rate: float | list[float] = DEFAULT_SFT_LEARNING_RATE
    batch_size: int | Literal["auto"] = "auto"
    # openpipe-art 0.5.23's: "last" trains only each conversation's final assistant turn (the rest is context)
    assistant_turns: Literal["all", "last"] = "all"
    megatron_topology: MegatronTopologyConfig | None = None  # the reference's; no effect here (warns)

    @field_validator("megatron_topology")
    @classmethod
    def _warn_megatron(cls, value: MegatronTopologyConfig | None) -> MegatronTopologyConfig | None:
        if value is not None:
            warnings.warn(
                "TrainSFTConfig(megatron_topology=...) has no effect here: there is no Megatron backend "
                "(LocalBackend trains on one device); it is accepted so code written for the reference runs",
                stacklevel=2,
            )
        return value

    @field_validator("learning_rate")
    @classmethod
    def _positive_learning_rates(cls, value: float | list[float]) -> float | list[float]:
        return check_learning_rates(value)

    @field_validator("batch_size")
    @classmethod
    def _positive_batch_size(cls, value: int | str) -> int | str:
        if isinstance(value, int) and value < 1:
            raise ValueError(f'batch_size must be at least 1 (or "auto"), got {value}')
        return value


def check_learning_rates(value: float | list[float]) -> float | list[float]:
    """Refuse a non-positive (or non-finite) learning rate, or an empty list, naming the bad index. A
    schedule's values may be 0 (a linear decay ends there)."""
    if not isinstance(value, list):
        if not 0 < value <= MAX_LEARNING_RATE:
            raise ValueError(
                f"learning_rate must be a positive finite number of at most {MAX_LEARNING_RATE}, got {value!r}"
            )
        return value
    if not value:
        raise ValueError("learning_rate is an empty list; give one value per batch, or a single float")
    for i, lr in enumerate(value):
        if not 0 <= lr <= MAX_LEARNING_RATE:
            raise ValueError(f"learning_rate[{i}] must be a number in [0, {MAX_LEARNING_RATE}], got {lr!r}")
    return value


class SFTSpec(TrainSFTConfig):
    """Everything one supervised fine-tuning call needs besides the trajectories: the keyword arguments
    of `Backend.train_sft` (serialisable, so a remote backend sends them as they are).

    The loss is the cross-entropy of every assistant token (plain dict assistant turns included, tool calls
    included), averaged over a batch's assistant tokens; one AdamW step per batch. Defaults follow the
    reference: no weight decay, gradients clipped to norm 1.
    """

    batch_tokens: int = Field(
        default=4096, ge=8, description='Token budget of one batch when batch_size="auto".'
    )
    max_grad_norm: float = Field(default=1.0, gt=0)
    weight_decay: float = Field(default=0.0, ge=0, le=MAX_WEIGHT_DECAY)
    adam_betas: Annotated[tuple[float, float], AfterValidator(check_adam_betas)] = (0.9, 0.99)
    max_seq_len: int = Field(
        default=4096, ge=8, description="A conversation longer than this is an error (or skipped)."
    )
    micro_batch_tokens: int = Field(
        default=4096, ge=8, description="Token budget of one forward/backward micro-batch."
    )
    skip_invalid: bool = Field(
        default=False,
        description="Skip (and count) invalid or too long conversations instead of stopping with an error.",
    )


class RejectedCheckpoint(BaseModel):
    """A checkpoint set aside under `checkpoints/rejected/` (a failed step, a corrupted checkpoint): kept
    for debugging, never served. `name` is its folder there (`{step:04d}-{UTC time}`)."""

    name: str
    step: int
    rejected_at: str | None = None
    reason: str | None = None


class TrainSFTResult(TrainResult):
    """What one `train_sft` call returns: the new step, averaged metrics (the reference's names, e.g.
    `loss/train`), and each batch's own metrics in order (`loss`, `learning_rate`, `grad_norm`, tokens)."""

    batch_metrics: list[Annotated[dict[str, float], BeforeValidator(_null_as_nan)]] = Field(
        default_factory=list
    )


class Registration(BaseModel):
    """Where a registered model is served: an OpenAI-compatible base URL, its key, and the latest step.

    Example:
        >>> art.Registration(base_url="http://127.0.0.1:8000/v1", api_key="secret").step
        0
    """

    base_url: str
    api_key: str
    step: int = 0
