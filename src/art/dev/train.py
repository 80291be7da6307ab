"""`TrainConfig` / `TrainSFTConfig`: the reference's experimental per-step options as dicts
(`model.train(groups, _config=art.dev.TrainConfig(...))`). Every key is also a `backend.train` keyword:
see `art.backends.train_options` for which apply here and which only warn."""

from __future__ import annotations

from typing import Literal

from typing_extensions import TypedDict


class TrainConfig(TypedDict, total=False):
    """Experimental per-step RL options (keywords of `backend.train`)."""

    advantage_balance: float
    allow_training_without_logprobs: bool
    epsilon: float
    epsilon_high: float | None
    importance_sampling_level: Literal["token", "sequence", "average", "geometric_average"]
    kl_penalty_coef: float
    kl_penalty_reference_step: int | None
    kl_penalty_source: Literal["current_learner", "sample"]
    kl_ref_adapter_path: str | None
    logprob_calculation_chunk_size: int
    mask_prob_ratio: bool
    max_negative_advantage_importance_sampling_weight: float
    num_trajectories_learning_rate_multiplier_power: float
    packed_sequence_length: int | None
    plot_tensors: bool
    precalculate_logprobs: bool
    scale_learning_rate_by_reward_std_dev: bool
    scale_rewards: bool
    truncated_importance_sampling: float | None


class TrainSFTConfig(TypedDict, total=False):
    """Experimental SFT options (SFT is issue 25)."""
