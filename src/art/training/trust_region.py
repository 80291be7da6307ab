"""The step's trust region (`TrainSpec.max_step_kl`): how far one update moved the policy on the step's own
tokens, and how far back to scale an update that moved it too far.

One AdamW update at too high a learning rate can send a policy that has just learned back to near-uniform
in a single step: the RL learning test at twice its rate collapsed in 10 of 48 seeds x dtypes, each time in
one step whose KL on its own tokens was ~5.7 nats a token where the other steps moved 0.005-0.5
(benchmarks/README.md, "A trust region for one step"). So, after the update, the trainer scores a sample of
the step's sequences (`check_sample`) with the new adapter, in eval mode as it scored them before the
update, and estimates KL(before || after) per trained token with Schulman's k3, `exp(d) - d - 1` for
`d = logp_after - logp_before` (>= 0; the tokens were sampled from the policy before), averaged over the
sample's trained tokens (`mean_k3`). Above `max_step_kl` the update is scaled back toward the old adapter,
`p = p_old + s * (p_new - p_old)`, `s` guessed from KL ~ s^2 (`next_scale`) and checked again, at most
`MAX_TRIES` times; an update that stays above it is undone (the adapter as before the step). This is TRPO's
backtracking line search on its KL constraint, with AdamW's step as the search direction; Stable-Baselines3's
PPO guards its epochs with the same kind of bound (`target_kl`).

What it costs: one forward pass without gradients over the sample (`CHECK_SHARE` of the step's sequences)
after the update; their logprobs before it are the training forward's own. More only on a step that is scaled
back (one forward per try). Ranks (`ddp_trainer`) score the sample before the update too, since each forwards
only its share of the step.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch

CHECK_SHARE = 0.125
"""The share of a step's sequences scored after the update (every 8th, in the step's order): a quarter cost
12% of the default model's step (2.5 of 20.9 s; benchmarks/README.md, "A trust region for one step"), and the
collapses it stops are ~100x a healthy step's KL, which a small sample tells as well."""
MAX_TRIES = 4
"""Scaled-back updates tried before the step's update is undone."""
MARGIN = 0.8
"""Aim below the bound: `next_scale` guesses the scale for `MARGIN * max_step_kl`."""


def check_sample(num_sequences: int, share: float = CHECK_SHARE) -> list[int]:
    """Indices of the sequences to score: every `round(1 / share)`-th from the first (at least one).

    Example:
        >>> check_sample(20), check_sample(3), check_sample(1)
        ([0, 8, 16], [0], [0])
    """
    if num_sequences <= 0:
        return []
    stride = max(1, round(1 / share))
    return list(range(0, num_sequences, stride))


def k3_sum(before_BT: torch.Tensor, after_BT: torch.Tensor, mask_BT: torch.Tensor) -> tuple[float, float]:
    """(sum of k3 over the masked tokens, their count): `exp(d) - d - 1`, `d = after - before` (logprobs)."""
    d = (after_BT.float() - before_BT.float()).clamp(-50.0, 50.0)
    k3 = (torch.exp(d) - d - 1.0) * mask_BT
    return float(k3.sum()), float(mask_BT.sum())


def mean_k3(
    before: Sequence[torch.Tensor], after: Sequence[torch.Tensor], masks: Sequence[torch.Tensor]
) -> float:
    """KL(before || after) per trained token, estimated over micro-batches of (before, after, mask) logprobs.

    Example:
        >>> lp = torch.log(torch.tensor([[0.5, 0.25]]))
        >>> mean_k3([lp], [lp], [torch.ones(1, 2)]), round(mean_k3([lp], [lp - 1.0], [torch.ones(1, 2)]), 4)
        (0.0, 0.3679)
    """
    total, count = 0.0, 0.0
    for b, a, m in zip(before, after, masks, strict=True):
        s, n = k3_sum(b, a, m)
        total, count = total + s, count + n
    return total / count if count else 0.0


def next_scale(scale: float, kl: float, max_kl: float) -> float:
    """The next scale of the update to try, after `scale` gave `kl` > `max_kl`: KL grows as the square of a
    small step, so `scale * sqrt(MARGIN * max_kl / kl)`.

    Example:
        >>> round(next_scale(1.0, 5.0, 0.2), 4)
        0.1789
    """
    if not math.isfinite(kl) or kl <= 0:
        return scale * 0.5
    return scale * math.sqrt(MARGIN * max_kl / kl)
