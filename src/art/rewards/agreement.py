"""Rank agreement between two lists of scores: Spearman's rho and Kendall's tau-b.

Used for judge agreement (ensembles), calibration (independent reward vs judge score) and comparing a new
judge with an old one. Both return None when the correlation is undefined (fewer than two items, or one
side constant), so callers record no metric rather than a misleading 0 or a NaN.
Groups are small (a handful of trajectories), so the O(n^2) Kendall tau is the clear choice.
"""

from __future__ import annotations

import math
from collections.abc import Sequence


def average_ranks(values: Sequence[float]) -> list[float]:
    """1-based ranks, ties sharing the mean of the ranks they span (e.g. [5, 1, 5] -> [2.5, 1, 2.5])."""
    order = sorted(range(len(values)), key=lambda i: values[i])
    ranks = [0.0] * len(values)
    start = 0
    while start < len(order):
        end = start
        while end + 1 < len(order) and values[order[end + 1]] == values[order[start]]:
            end += 1
        for k in range(start, end + 1):
            ranks[order[k]] = (start + end) / 2 + 1
        start = end + 1
    return ranks


def _check(x: Sequence[float], y: Sequence[float]) -> None:
    if len(x) != len(y):
        raise ValueError(f"rank correlation needs two lists of the same length, got {len(x)} and {len(y)}")


def spearman(x: Sequence[float], y: Sequence[float]) -> float | None:
    """Spearman's rank correlation (Pearson on average ranks), or None when undefined.

    Example:
        >>> spearman([1.0, 2.0, 3.0], [10.0, 20.0, 30.0])
        1.0
    """
    _check(x, y)
    if len(x) < 2:
        return None
    rx, ry = average_ranks(x), average_ranks(y)
    mx, my = sum(rx) / len(rx), sum(ry) / len(ry)
    cov = sum((a - mx) * (b - my) for a, b in zip(rx, ry, strict=True))
    vx = sum((a - mx) ** 2 for a in rx)
    vy = sum((b - my) ** 2 for b in ry)
    if vx == 0 or vy == 0:
        return None
    return cov / math.sqrt(vx * vy)


def kendall_tau(x: Sequence[float], y: Sequence[float]) -> float | None:
    """Kendall's tau-b (accounts for ties), or None when undefined.

    Example:
        >>> kendall_tau([1.0, 2.0, 3.0], [3.0, 2.0, 1.0])
        -1.0
    """
    _check(x, y)
    n = len(x)
    concordant = discordant = ties_x = ties_y = 0
    for i in range(n):
        for j in range(i + 1, n):
            dx = (x[i] > x[j]) - (x[i] < x[j])
            dy = (y[i] > y[j]) - (y[i] < y[j])
            if dx == 0 and dy == 0:
                continue
            if dx == 0:
                ties_x += 1
            elif dy == 0:
                ties_y += 1
            elif dx == dy:
                concordant += 1
            else:
                discordant += 1
    denominator = math.sqrt((concordant + discordant + ties_x) * (concordant + discordant + ties_y))
    if denominator == 0:
        return None
    return (concordant - discordant) / denominator


def pairwise_kendall(score_lists: Sequence[Sequence[float]]) -> list[float]:
    """Kendall tau-b of every pair of score lists (pairs where it is undefined are left out)."""
    taus: list[float] = []
    for a in range(len(score_lists)):
        for b in range(a + 1, len(score_lists)):
            tau = kendall_tau(score_lists[a], score_lists[b])
            if tau is not None:
                taus.append(tau)
    return taus
