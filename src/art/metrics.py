"""Aggregate metrics of logged trajectory groups (what `Model.log` writes to history.jsonl)."""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Sequence

from .trajectories import TrajectoryGroup


def _std(values: Sequence[float]) -> float:
    if len(values) < 2:
        return 0.0
    mean = sum(values) / len(values)
    return math.sqrt(sum((v - mean) ** 2 for v in values) / len(values))


def group_metrics(groups: Sequence[TrajectoryGroup]) -> dict[str, float]:
    """Reward mean and spread, exception rate, counts, and the mean of every trajectory metric.

    `reward_std` is over all trajectories; `group_reward_std` is the mean spread within groups (zero
    means the groups teach nothing: every trajectory in a group got the same reward).
    """
    rewards = [t.reward for g in groups for t in g.trajectories]
    n_exc = sum(len(g.exceptions) for g in groups)
    n_total = len(rewards) + n_exc
    out: dict[str, float] = {
        "num_groups": float(len(groups)),
        "num_trajectories": float(len(rewards)),
        "exception_rate": n_exc / n_total if n_total else 0.0,
    }
    if rewards:
        out["reward"] = sum(rewards) / len(rewards)
        out["reward_std"] = _std(rewards)
        spreads = [_std([t.reward for t in g.trajectories]) for g in groups if g.trajectories]
        out["group_reward_std"] = sum(spreads) / len(spreads)
    sums: dict[str, float] = defaultdict(float)
    counts: dict[str, int] = defaultdict(int)
    for g in groups:
        for t in g.trajectories:
            for key, value in t.metrics.items():
                if isinstance(value, int | float) and math.isfinite(float(value)):
                    sums[key] += float(value)
                    counts[key] += 1
    for key, total in sums.items():
        if key not in out:
            out[key] = total / counts[key]
    return out
