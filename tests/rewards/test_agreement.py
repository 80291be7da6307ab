"""Rank correlations used for agreement and calibration metrics."""

from __future__ import annotations

import pytest

from art.rewards.agreement import average_ranks, kendall_tau, pairwise_kendall, spearman


def test_average_ranks_share_ties() -> None:
    assert average_ranks([5, 1, 5, 3]) == [3.5, 1.0, 3.5, 2.0]


def test_perfect_reversed_and_undefined() -> None:
    assert spearman([1, 2, 3], [10, 20, 30]) == pytest.approx(1.0)
    assert kendall_tau([1, 2, 3], [3, 2, 1]) == pytest.approx(-1.0)
    assert spearman([1, 1, 1], [1, 2, 3]) is None and kendall_tau([1, 1], [1, 2]) is None
    assert spearman([1], [2]) is None
    with pytest.raises(ValueError, match="same length"):
        kendall_tau([1, 2], [1])


def test_known_values_with_ties() -> None:
    # Hand-computed: pairs (x, y) over [(1,1), (2,3), (3,2), (4,4)]: 5 concordant, 1 discordant -> 4/6.
    assert kendall_tau([1, 2, 3, 4], [1, 3, 2, 4]) == pytest.approx(4 / 6)
    assert spearman([1, 2, 3, 4], [1, 3, 2, 4]) == pytest.approx(0.8)
    # tau-b with a tie in x: n0=3, n1=1, n2=0, C=2, D=0 -> 2 / sqrt(2 * 3).
    assert kendall_tau([1, 1, 2], [1, 2, 3]) == pytest.approx(2 / 6**0.5)
    assert pairwise_kendall([[1, 2, 3], [1, 2, 3], [3, 2, 1], [5, 5, 5]]) == pytest.approx([1.0, -1.0, -1.0])
