"""Group-relative advantages (GRPO): how much better each rollout did than its siblings.

`A = r - mean(r)` over the group, divided by `std(r) + 1e-6` when `scale_rewards` (the default). The
standard deviation is the sample one (Bessel-corrected, `torch.std`'s default), as the reference system and
TRL use. A group whose rewards are all equal has nothing to compare and every advantage is exactly zero;
so is any single trajectory that scored exactly the group mean. Zero-advantage trajectories are dropped by
the caller (they would contribute zero gradient at full compute cost).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

STD_EPSILON = 1e-6


def group_advantages(rewards: Sequence[float], *, scale_rewards: bool = True) -> list[float]:
    """Advantages of one group's rewards, in order; zeros when the rewards are all equal.

    A reward that equals the mean up to float rounding (e.g. [0.1, 0.1, 0.1]) gets exactly 0.0, so callers
    can drop zero-advantage trajectories with `== 0.0`.
    """
    n = len(rewards)
    if n < 2 or max(rewards) == min(rewards):
        return [0.0] * n
    mean = math.fsum(rewards) / n
    centred = [0.0 if math.isclose(r, mean, rel_tol=1e-12, abs_tol=1e-12) else r - mean for r in rewards]
    if not scale_rewards:
        return centred
    std = math.sqrt(math.fsum((r - mean) ** 2 for r in rewards) / (n - 1))
    return [a / (std + STD_EPSILON) for a in centred]


def reward_stats(rewards: Sequence[float]) -> tuple[float, float]:
    """(mean, population std) of rewards, for metrics; (nan, nan) when there are none."""
    if not rewards:
        return math.nan, math.nan
    mean = math.fsum(rewards) / len(rewards)
    return mean, math.sqrt(math.fsum((r - mean) ** 2 for r in rewards) / len(rewards))
