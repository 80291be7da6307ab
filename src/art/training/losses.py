"""Policy losses on per-token logprobs: CISPO (default), PPO, token- or sequence-level importance ratios
(or their arithmetic or geometric average, as the reference offers).

With `logp` the current policy's logprob of a sampled token and `logp_old` the engine's (the policy that
sampled it), the importance ratio is `ratio = exp(logp - logp_old)`, per token, or per sequence (GSPO:
`exp(mean over the sequence's assistant tokens of (logp - logp_old))`, applied to each of its tokens).
With `eps, eps_high = TrainSpec.clip_range()` and advantage `A` of the token's sequence:

- cispo: `-clip(ratio.detach(), 1 - eps, 1 + eps_high) * A * logp`. The clipped ratio is a weight only, so
  every token keeps a gradient (CISPO's point: clipping the weight, never dropping the token).
- ppo:   `-min(ratio * A, clip(ratio, 1 - eps, 1 + eps_high) * A)`.
- KL to the base model (when `kl_penalty_coef > 0`): the k3 estimator
  `exp(logp_ref - logp) - (logp_ref - logp) - 1`, unbiased for KL(policy || base) with the tokens sampled
  from the policy, always >= 0; added per token times `kl_penalty_coef`.

The loss is the masked mean over assistant tokens. With gradient accumulation, pass `normalizer` = the
number of assistant tokens in the whole step, so that micro-batch losses sum to the step's mean.

`sft_loss` is supervised fine-tuning's cross-entropy, `-logp` per assistant token, with the same mean.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch

from art.types import DEFAULT_LOSS_FN, LOSS_FN_CHOICES, LOSS_FNS, ImportanceSamplingLevel, LossFn

# exp() of a log-ratio above this overflows float32 long before it means anything; clamp for safety.
MAX_LOG_RATIO = 20.0


@dataclass
class LossOutput:
    """The loss (with gradient) and detached sums for metrics (divide by token counts to average)."""

    loss: torch.Tensor
    ratio_sum: float
    clipped_tokens: float
    kl_sum: float
    num_tokens: float
    ratio_BT: torch.Tensor | None = None  # detached importance ratios (for the trainer's record)


def importance_ratio(
    logprobs_BT: torch.Tensor,
    sampled_logprobs_BT: torch.Tensor,
    mask_BT: torch.Tensor,
    level: ImportanceSamplingLevel = "token",
) -> torch.Tensor:
    """ratio_BT per token, each sequence's (row's) GSPO ratio broadcast over its tokens, or a blend of both:
    `"average"` is `(token + sequence) / 2`, `"geometric_average"` is `sqrt(token * sequence)`."""
    mask = mask_BT.to(logprobs_BT.dtype)
    token_BT = (logprobs_BT - sampled_logprobs_BT) * mask
    if level == "token":
        return torch.exp(token_BT.clamp(max=MAX_LOG_RATIO))
    sequence_B = token_BT.sum(-1) / mask.sum(-1).clamp(min=1.0)
    sequence_BT = sequence_B[:, None].expand_as(logprobs_BT)
    if level == "sequence":
        return torch.exp(sequence_BT.clamp(max=MAX_LOG_RATIO))
    if level == "geometric_average":
        return torch.exp(((token_BT + sequence_BT) / 2).clamp(max=MAX_LOG_RATIO))
    if level == "average":
        return (
            torch.exp(token_BT.clamp(max=MAX_LOG_RATIO)) + torch.exp(sequence_BT.clamp(max=MAX_LOG_RATIO))
        ) / 2
    raise ValueError(
        f"unknown importance_sampling_level {level!r}; use 'token', 'sequence', 'average' or 'geometric_average'"
    )


def cispo(
    ratio_BT: torch.Tensor, advantages_BT: torch.Tensor, logprobs_BT: torch.Tensor, low: float, high: float
) -> torch.Tensor:
    """CISPO's per-token loss: the clipped ratio as a constant weight of the policy gradient."""
    return -ratio_BT.detach().clamp(low, high) * advantages_BT * logprobs_BT


def ppo(
    ratio_BT: torch.Tensor, advantages_BT: torch.Tensor, logprobs_BT: torch.Tensor, low: float, high: float
) -> torch.Tensor:
    """PPO's clipped surrogate, per token."""
    return -torch.minimum(ratio_BT * advantages_BT, ratio_BT.clamp(low, high) * advantages_BT)


PerTokenLoss = Callable[[torch.Tensor, torch.Tensor, torch.Tensor, float, float], torch.Tensor]
PER_TOKEN_LOSSES: dict[str, PerTokenLoss] = {name: globals()[name] for name in LOSS_FNS}
"""Each loss `art.types.LossFn` names, by the function of that name above (a new loss: a name there, a
function here)."""


def policy_loss(
    logprobs_BT: torch.Tensor,
    sampled_logprobs_BT: torch.Tensor,
    advantages_B: torch.Tensor,
    mask_BT: torch.Tensor,
    *,
    loss_fn: LossFn = DEFAULT_LOSS_FN,
    epsilon: float = 1.0,
    epsilon_high: float = 4.0,
    importance_sampling_level: ImportanceSamplingLevel = "token",
    ref_logprobs_BT: torch.Tensor | None = None,
    kl_penalty_coef: float = 0.0,
    normalizer: float | None = None,
) -> LossOutput:
    """The policy loss of one (micro-)batch: sum of per-token losses over `mask_BT` / `normalizer`.

    `normalizer` defaults to the number of masked tokens (a plain masked mean).
    """
    mask = mask_BT.to(logprobs_BT.dtype)
    num_tokens = float(mask.sum())
    normalizer = num_tokens if normalizer is None else normalizer
    ratio_BT = importance_ratio(logprobs_BT, sampled_logprobs_BT, mask_BT, importance_sampling_level)
    low, high = 1.0 - epsilon, 1.0 + epsilon_high
    advantages_BT = advantages_B[:, None].to(logprobs_BT.dtype).expand_as(logprobs_BT)
    per_token = PER_TOKEN_LOSSES.get(loss_fn)
    if per_token is None:
        raise ValueError(f"unknown loss_fn {loss_fn!r}; use {LOSS_FN_CHOICES}")
    per_token_BT = per_token(ratio_BT, advantages_BT, logprobs_BT, low, high)
    kl_sum = 0.0
    if ref_logprobs_BT is not None and kl_penalty_coef > 0:
        delta_BT = (ref_logprobs_BT - logprobs_BT) * mask  # log(p_ref / p); 0 off the mask
        kl_BT = torch.exp(delta_BT) - delta_BT - 1.0  # k3: >= 0, unbiased for KL(p || p_ref)
        per_token_BT = per_token_BT + kl_penalty_coef * kl_BT
        kl_sum = float((kl_BT.detach() * mask).sum())
    loss = (per_token_BT * mask).sum() / max(normalizer, 1.0)
    with torch.no_grad():
        ratio = ratio_BT.detach()
        clipped = ((ratio < low) | (ratio > high)).to(mask.dtype) * mask
        ratio_sum = float((ratio * mask).sum())
    return LossOutput(loss, ratio_sum, float(clipped.sum()), kl_sum, num_tokens, ratio)


def sft_loss(
    logprobs_BT: torch.Tensor, mask_BT: torch.Tensor, *, normalizer: float | None = None
) -> LossOutput:
    """Cross-entropy of the masked (assistant) tokens: sum of `-logprobs_BT` over `mask_BT` / `normalizer`.

    `normalizer` defaults to the number of masked tokens (the mean). The ratio sum is that of ratio 1 (the
    data is not sampled from any policy), so `ratio_mean` reads 1.
    """
    mask = mask_BT.to(logprobs_BT.dtype)
    num_tokens = float(mask.sum())
    normalizer = num_tokens if normalizer is None else normalizer
    loss = -(logprobs_BT * mask).sum() / max(normalizer, 1.0)
    return LossOutput(loss, num_tokens, 0.0, 0.0, num_tokens)
