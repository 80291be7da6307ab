"""Configuration and result types that cross the client/service boundary (pydantic v2).

Defaults live here and nowhere else. `TrainConfig` is the original API's per-step config;
`TrainSpec` is the full set of per-step training parameters that `Backend.train(...)` accepts as keyword
arguments and that the service receives (locally or over HTTP).
"""

from __future__ import annotations

import warnings
from typing import Any, Literal

from pydantic import AliasChoices, BaseModel, ConfigDict, Field, model_validator

LossFn = Literal["cispo", "ppo"]
ImportanceSamplingLevel = Literal["token", "sequence"]
Split = str  # "train", "val", or any name of the user's; validated as a path-safe name by storage


class TrainConfig(BaseModel):
    """Per-step config of the original API: `await model.train(groups, config=TrainConfig(...))`."""

    model_config = ConfigDict(extra="forbid")

    learning_rate: float = Field(default=5e-6, gt=0, description="AdamW learning rate for this step.")
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


class LoRAConfig(BaseModel):
    """The LoRA adapter that training updates. Defaults follow the reference system.

    Also accepts the reference's `art.dev.LoRAConfig` dict: `rank` is `r`, and its Unsloth/PEFT-only keys
    (`bias`, `use_rslora`, ...) are dropped with a warning naming them.
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


class TrainSpec(BaseModel):
    """Everything one training step needs besides the groups; `Backend.train` keyword arguments."""

    model_config = ConfigDict(extra="forbid")

    learning_rate: float = Field(default=5e-6, gt=0)
    loss_fn: LossFn = "cispo"
    epsilon: float | None = Field(
        default=None, gt=0, description="Lower clip; default 1.0 for cispo, 0.2 for ppo."
    )
    epsilon_high: float | None = Field(
        default=None, gt=0, description="Upper clip; default 4.0 for cispo, epsilon for ppo."
    )
    importance_sampling_level: ImportanceSamplingLevel = "token"
    kl_penalty_coef: float = Field(default=0.0, ge=0)
    scale_rewards: bool = True
    max_grad_norm: float = Field(default=1.0, gt=0)
    weight_decay: float = Field(default=0.1, ge=0)
    adam_betas: tuple[float, float] = (0.9, 0.99)
    max_seq_len: int = Field(default=4096, ge=8, description="Longer sequences are reported and dropped.")
    micro_batch_tokens: int = Field(
        default=4096, ge=8, description="Token budget of one forward/backward micro-batch."
    )

    def clip_range(self) -> tuple[float, float]:
        """(epsilon, epsilon_high) with the loss function's defaults filled in."""
        if self.loss_fn == "cispo":
            low = 1.0 if self.epsilon is None else self.epsilon
            high = 4.0 if self.epsilon_high is None else self.epsilon_high
        else:
            low = 0.2 if self.epsilon is None else self.epsilon
            high = low if self.epsilon_high is None else self.epsilon_high
        return low, high


class TrainResult(BaseModel):
    """What one training step returns: the new step number and its metrics (unprefixed names)."""

    step: int
    metrics: dict[str, float] = Field(default_factory=dict)
    message: str | None = Field(
        default=None, description="Plain-language note, e.g. why nothing was trainable in this step."
    )
    checkpoint_path: str | None = Field(
        default=None, description="The folder of checkpoint `step` (a PEFT adapter), when it is on disk."
    )


class LocalTrainResult(TrainResult):
    """`LocalBackend.train`'s result (the reference's name); the same fields as `TrainResult`."""
