"""The reference's `art.loss` (its Unsloth/Megatron trainers' RL loss over packed tensors): `loss_fn`,
`LossInputs`, `AlignedLossInputs`, `Loss`, `shift_tensor`, `compute_probs_corr`, with its names, arguments and
results, for code (and tests) written against it. ART's trainer computes its loss in `art.training.losses`
(the same objectives, DESIGN section 3 item 5); this module is not on its path.

What `loss_fn` computes, over packed rows (B x T), every input shifted one to the left first
(`shift_tensor`: position t holds what predicts token t + 1):
- the importance ratio `exp(new - old)` per token (`importance_sampling_level` "token"), or the mean log-ratio
  of the token's sequence (`group_ids`) exponentiated ("sequence"), or their arithmetic or geometric average;
  a token with no sampled logprob (NaN) counts as sampled by the current policy (ratio 1);
- optionally a KL penalty to a reference policy: each token's advantage gets
  `kl_penalty_coef * (mean KL - its KL)`, the KL taken from the learner's logprobs ("current_learner") or the
  sampled ones ("sample"), reported as `kl_policy_ref`;
- the loss: CISPO `-clip(ratio.detach(), 1 - eps, 1 + eps_high) * A * logp_new` (eps 1, eps_high 4), or with
  `ppo` the clipped surrogate (eps 0.2); optional `truncated_importance_sampling`, `mask_prob_ratio`,
  `kimi_k2_tau`, `max_negative_advantage_importance_sampling_weight`;
- reduced over the assistant tokens ("mean", weighted) or summed ("sum"); the entropy likewise.
Positions outside the assistant mask are zeroed before any arithmetic, so a NaN there (a logprob nobody
computed) reaches neither the loss nor its gradient.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

import torch
from pydantic import BaseModel, ConfigDict

Reduction = Literal["mean", "sum"]
_TINY = 1e-18  # keeps an empty mask's mean at 0 (the reference's)


def shift_tensor(tensor: torch.Tensor, pad: int | float | bool) -> torch.Tensor:
    """`tensor[:, 1:]` with `pad` appended on the right: aligns per-token inputs with next-token logprobs.

    Example:
        >>> shift_tensor(torch.tensor([[1, 2, 3]]), 0).tolist()
        [[2, 3, 0]]
    """
    return torch.nn.functional.pad(tensor[:, 1:], (0, 1), value=pad)


class Loss(BaseModel):
    """What `loss_fn` returns: the reduced policy loss (what to backpropagate), its plain sum, the mean
    entropy (when entropies were given), the correlation of old and new token probabilities, and the mean KL
    to the reference policy (when a KL penalty applied)."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    reduction: Reduction
    policy_loss: torch.Tensor
    entropy: torch.Tensor | None
    policy_loss_sum: torch.Tensor
    probs_corr: torch.Tensor
    kl_policy_ref: torch.Tensor | None = None


class AlignedLossInputs(BaseModel):
    """Per-token loss inputs already aligned with the new logprobs (B x T each)."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    assistant_mask: torch.Tensor
    old_logprobs: torch.Tensor
    advantages: torch.Tensor
    weights: torch.Tensor
    group_ids: torch.Tensor
    original_logprobs: torch.Tensor | None = None
    entropies_are_aligned: bool = False

    def align_inputs(self) -> AlignedLossInputs:
        """Itself (already aligned)."""
        return self

    def group_mean(self, values: torch.Tensor, by: torch.Tensor) -> torch.Tensor:
        """Each position's mean of `values` over the positions sharing its id in `by` (same shape)."""
        ids = by.reshape(-1).long()
        _, index = torch.unique(ids, return_inverse=True)
        count = int(index.max().item()) + 1 if index.numel() else 0
        sums = torch.zeros(count, dtype=values.dtype, device=values.device).index_add(
            0, index, values.reshape(-1)
        )
        sizes = torch.zeros(count, dtype=values.dtype, device=values.device).index_add(
            0, index, torch.ones_like(values.reshape(-1))
        )
        return (sums / sizes)[index].reshape(values.shape)

    def masked_mean(self, values: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """The sum of `values` (already masked) over the mask's size."""
        return values.sum() / (mask.sum() + _TINY)

    def denominator(self, mask: torch.Tensor, reduction: Reduction) -> torch.Tensor | float:
        """What the summed loss is divided by: the assistant tokens ("mean") or 1 ("sum")."""
        return 1.0 if reduction == "sum" else mask.sum() + _TINY

    def aligned_entropies(self, entropies: torch.Tensor | None) -> torch.Tensor | None:
        """`entropies` aligned like the other inputs (shifted unless `entropies_are_aligned`)."""
        if entropies is None or self.entropies_are_aligned:
            return entropies
        return shift_tensor(entropies, 0.0)


class LossInputs(BaseModel):
    """Packed training tensors by name (`assistant_mask`, `logprobs`, `advantages`, `weights`, `group_ids`,
    optionally `original_logprobs`), not yet aligned: `align_inputs` shifts each one left by a token."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    inputs: Any

    def align_inputs(self) -> AlignedLossInputs:
        """The inputs shifted to line up with next-token logprobs (see `shift_tensor`)."""
        given: Mapping[str, torch.Tensor] = self.inputs
        original = given.get("original_logprobs") if isinstance(given, Mapping) else None
        return AlignedLossInputs(
            assistant_mask=shift_tensor(given["assistant_mask"], False),
            old_logprobs=shift_tensor(given["logprobs"], float("nan")),
            advantages=shift_tensor(given["advantages"], 0.0),
            weights=shift_tensor(given["weights"], 0.0),
            group_ids=shift_tensor(given["group_ids"], 0),
            original_logprobs=None if original is None else shift_tensor(original, 0.0),
        )


def compute_probs_corr(old_logprobs: torch.Tensor, new_logprobs: torch.Tensor) -> torch.Tensor:
    """Pearson correlation of the sampled and the new token probabilities where a sampled one exists (0 when
    fewer than two, or when either side does not vary)."""
    known = ~torch.isnan(old_logprobs)
    old_p, new_p = torch.exp(old_logprobs[known]), torch.exp(new_logprobs[known].detach())
    if old_p.numel() < 2:
        return new_logprobs.new_zeros(())
    spreads = (old_p.std(unbiased=False), new_p.std(unbiased=False))
    if any(not torch.isfinite(s).item() or s.item() == 0.0 for s in spreads):
        return new_logprobs.new_zeros(())
    return torch.corrcoef(torch.stack([old_p, new_p]))[0, 1]


def _ratio(aligned: AlignedLossInputs, diff: torch.Tensor, mask: torch.Tensor, level: str) -> torch.Tensor:
    """The importance ratio at `importance_sampling_level` `level`."""
    token = torch.exp(diff)
    if level == "token":
        return token
    sequence = torch.exp(aligned.group_mean(diff, by=aligned.group_ids * mask))
    if level == "sequence":
        return sequence
    if level == "average":
        return (token + sequence) / 2
    if level == "geometric_average":
        return token**0.5 * sequence**0.5
    raise ValueError(
        f"importance_sampling_level {level!r}: 'token', 'sequence', 'average' or 'geometric_average'"
    )


def _kl_penalty(
    config: Mapping[str, Any],
    aligned: AlignedLossInputs,
    sources: tuple[torch.Tensor, torch.Tensor],
    ref: torch.Tensor,
    mask: torch.Tensor,
) -> tuple[torch.Tensor, torch.Tensor]:
    """(the advantage adjustment, the mean KL) for a KL penalty to `ref`; `sources` (learner, sampled)."""
    source = config.get("kl_penalty_source", "current_learner")
    if source not in ("current_learner", "sample"):
        raise ValueError(f"kl_penalty_source {source!r}: 'current_learner' or 'sample'")
    chosen = sources[0] if source == "current_learner" else sources[1]
    kl_per_token = (chosen.detach() - ref).detach() * mask
    mean_kl = aligned.masked_mean(kl_per_token, mask)
    return float(config["kl_penalty_coef"]) * (mean_kl - kl_per_token) * mask, mean_kl


def loss_fn(
    inputs: LossInputs | AlignedLossInputs | Mapping[str, torch.Tensor],
    new_logprobs: torch.Tensor,
    ref_logprobs: torch.Tensor | None,
    entropies: torch.Tensor | None,
    experimental_config: Mapping[str, Any],
    reduction: Reduction = "mean",
) -> Loss:
    """The reference's RL loss over packed rows (see the module docstring); `experimental_config` holds
    `art.dev.TrainConfig` keys (`ppo`, `epsilon`, `epsilon_high`, `kl_penalty_coef`, ...). `inputs` may
    also be the tensors by name themselves (openpipe-art 0.5.18's form), taken as `LossInputs(inputs=...)`.

    Example:
        loss = loss_fn(LossInputs(inputs=packed), new_logprobs, None, None, {"epsilon_high": 4.0})
        loss.policy_loss.backward()
    """
    config = experimental_config
    if isinstance(inputs, Mapping):
        inputs = LossInputs(inputs=inputs)
    aligned = inputs.align_inputs()
    keep = aligned.assistant_mask.bool()
    mask = keep.to(new_logprobs.dtype)
    zero = torch.zeros((), dtype=new_logprobs.dtype, device=new_logprobs.device)
    new = torch.where(keep, new_logprobs, zero)  # no NaN of an unmasked position reaches the arithmetic
    old_known = torch.where(keep, aligned.old_logprobs, zero.new_tensor(float("nan")))
    probs_corr = compute_probs_corr(old_known, new)
    old = torch.where(torch.isnan(old_known), new.detach(), old_known)  # unsampled: the current policy's
    advantages = torch.where(keep, aligned.advantages, zero)
    diff = new - old
    ratio = _ratio(aligned, diff, mask, str(config.get("importance_sampling_level", "token")))
    ppo = bool(config.get("ppo", False))
    epsilon = config.get("epsilon", 0.2 if ppo else 1.0)
    epsilon_high = config.get("epsilon_high", None if ppo else 4.0)
    epsilon_high = epsilon if epsilon_high is None else epsilon_high
    if cap := config.get("max_negative_advantage_importance_sampling_weight"):
        ratio = torch.clamp(ratio, max=cap)
    if config.get("mask_prob_ratio", False):
        ratio = torch.where((ratio > 1 - epsilon) & (ratio < 1 + epsilon_high), ratio, zero)
    if tau := config.get("kimi_k2_tau"):
        advantages = advantages - tau * diff.detach()
    kl_policy_ref = None
    if config.get("kl_penalty_coef", 0.0) > 0 and ref_logprobs is not None:
        ref = torch.where(keep, ref_logprobs, zero)
        penalty, kl_policy_ref = _kl_penalty(config, aligned, (new, old), ref, mask)
        advantages = advantages + penalty
    clipped = torch.clip(ratio, 1 - epsilon, 1 + epsilon_high)
    if ppo:
        per_token = -torch.min(ratio * advantages, clipped * advantages)
    else:  # CISPO: a clipped, detached importance weight on REINFORCE
        per_token = -(clipped.detach() * advantages * new)
    if bound := config.get("truncated_importance_sampling"):
        if aligned.original_logprobs is not None:
            original = torch.where(keep, aligned.original_logprobs, zero)
            original = torch.where(torch.isnan(original), new.detach(), original)
            ratio = torch.exp(old - original)
        per_token = per_token * torch.clamp(ratio, max=bound).detach()
    per_token = per_token * aligned.weights * mask
    denominator = aligned.denominator(mask, reduction)
    aligned_entropies = aligned.aligned_entropies(entropies)
    entropy = None
    if aligned_entropies is not None:
        entropy = (torch.where(keep, aligned_entropies, zero) * aligned.weights * mask).sum() / denominator
    return Loss(
        reduction=reduction,
        policy_loss=per_token.sum() / denominator,
        entropy=entropy,
        policy_loss_sum=per_token.sum(),
        probs_corr=probs_corr,
        kl_policy_ref=kl_policy_ref,
    )


__all__ = ["AlignedLossInputs", "Loss", "LossInputs", "compute_probs_corr", "loss_fn", "shift_tensor"]
