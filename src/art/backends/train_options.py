"""The keyword arguments of `backend.train(model, groups, **kwargs)`: ours and every one of the reference's.

Code written for the reference's `LocalBackend.train` must run here unchanged, so every keyword it
accepts is accepted here, in one of four ways:

- a `TrainSpec` field (`learning_rate`, `loss_fn`, `epsilon`, `scale_rewards`, ...): implemented;
- a reference name for something we implement (`normalize_advantages=False` is `scale_rewards=False`;
  `verbose` prints the step's note and metrics; `loss_fn_config` and `adam_params` must stay None, as in
  the reference's `LocalBackend`);
- a reference option with no counterpart here (`advantage_balance`, `plot_tensors`, ...): accepted; a
  value other than the reference's default warns once per process, naming it and saying it has no effect
  (the default changes nothing, so it stays quiet);
- anything else is a typo: `TypeError` naming the closest valid keyword.

    >>> resolve_train_kwargs({"learning_rate": 1e-5, "normalize_advantages": False}).spec.scale_rewards
    False
"""

from __future__ import annotations

import difflib
import warnings
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from art.types import LOSS_FN_CHOICES, TrainSpec

# Reference keywords with no effect here, and the reference's default for each (passing it changes nothing).
NO_EFFECT_DEFAULTS: dict[str, Any] = {
    "advantage_balance": 0.0,
    "kl_penalty_reference_step": None,
    "kl_ref_adapter_path": None,
    "kl_penalty_source": "current_learner",
    "max_negative_advantage_importance_sampling_weight": None,
    "mask_prob_ratio": False,
    "kimi_k2_tau": None,
    "precalculate_logprobs": False,
    "plot_tensors": False,
    "truncated_importance_sampling": None,
    "scale_learning_rate_by_reward_std_dev": False,
    "logprob_calculation_chunk_size": 1024,
    "packed_sequence_length": None,
    "megatron_topology": None,
    "num_trajectories_learning_rate_multiplier_power": 0.0,
    "save_checkpoint": True,
    # openpipe-art 0.5.23's
    "optimizer_save_interval": 5,
    "final_training_step": None,
    "grad_accumulation_sequences": None,
}
# Why each has no effect, when a word helps the user.
_NO_EFFECT_REASON: dict[str, str] = {
    "kl_penalty_reference_step": "the KL penalty (kl_penalty_coef) is always to the base model here",
    "kl_ref_adapter_path": "the KL penalty (kl_penalty_coef) is always to the base model here",
    "save_checkpoint": "every step is saved: the served adapter is the saved checkpoint",
    "packed_sequence_length": "sequences are batched by micro_batch_tokens here",
    "logprob_calculation_chunk_size": "sequences are batched by micro_batch_tokens here",
    "optimizer_save_interval": "the optimizer state is saved with every checkpoint here",
    "final_training_step": "the optimizer state is saved with every checkpoint here",
    "grad_accumulation_sequences": "a step is one optimizer step over all its sequences here",
}
# Reference keywords we implement under another name, or that must keep the reference's only valid value.
IMPLEMENTED = ("normalize_advantages", "verbose", "loss_fn_config", "adam_params")

_warned: set[str] = set()


@dataclass(frozen=True)
class TrainOptions:
    """`backend.train` keywords resolved: the step's `TrainSpec` and how chatty to be."""

    spec: TrainSpec
    verbose: bool = False


def valid_keywords() -> list[str]:
    """Every keyword `backend.train` accepts, sorted."""
    return sorted({*TrainSpec.model_fields, *IMPLEMENTED, *NO_EFFECT_DEFAULTS})


def _refuse_unknown(unknown: list[str]) -> None:
    valid = valid_keywords()
    parts = []
    for name in unknown:
        close = difflib.get_close_matches(name, valid, n=1, cutoff=0.6)
        parts.append(f"{name!r}" + (f" (did you mean {close[0]!r}?)" if close else ""))
    raise TypeError(f"unknown training option {', '.join(parts)}; valid options: {', '.join(valid)}")


def _warn_no_effect(name: str, value: Any) -> None:
    if name in _warned:
        return
    _warned.add(name)
    reason = _NO_EFFECT_REASON.get(name, "this option of the reference's backend is not implemented here")
    warnings.warn(
        f"backend.train({name}={value!r}) has no effect here: {reason}. It is accepted so code written for "
        "the reference runs unchanged (see docs/compat.md); this warning is shown once.",
        stacklevel=4,
    )


def resolve_train_kwargs(kwargs: dict[str, Any]) -> TrainOptions:
    """Validate `backend.train` keyword arguments; errors name the option and the fix."""
    options = dict(kwargs)
    unknown = sorted(set(options) - set(valid_keywords()))
    if unknown:
        _refuse_unknown(unknown)
    verbose = bool(options.pop("verbose", False))
    for name in ("loss_fn_config", "adam_params"):
        if options.pop(name, None) is not None:
            raise ValueError(
                f"backend.train({name}=...) must be None with LocalBackend (as in the reference): "
                + (
                    f"the loss is chosen with loss_fn ({LOSS_FN_CHOICES}), epsilon and epsilon_high"
                    if name == "loss_fn_config"
                    else "set the optimizer with learning_rate, adam_betas, weight_decay and max_grad_norm"
                )
            )
    if "normalize_advantages" in options:
        normalize = options.pop("normalize_advantages")
        if not normalize:  # the reference: False centres rewards without dividing by their spread
            options["scale_rewards"] = False
    for name, default in NO_EFFECT_DEFAULTS.items():
        if name in options:
            value = options.pop(name)
            if value != default:
                _warn_no_effect(name, value)
    try:
        return TrainOptions(spec=TrainSpec(**options), verbose=verbose)
    except ValidationError as e:
        problems = "; ".join(f"{'.'.join(map(str, err['loc']))}: {err['msg']}" for err in e.errors())
        raise ValueError(f"invalid training options: {problems}") from None
