"""`art.metrics.gpu`: what a step's `costs/gpu` is priced at."""

from __future__ import annotations

import pytest

from art.metrics.gpu import check_gpu_cost_per_hour_usd, gpu_hourly_price, hourly_cost_usd


def test_known_gpus_are_priced_on_their_own_and_unknown_ones_not_guessed() -> None:
    assert gpu_hourly_price(["NVIDIA H200", "NVIDIA H200 NVL"]) == 6.0
    assert gpu_hourly_price(["NVIDIA H200", "NVIDIA A100-SXM4-80GB"]) is None
    assert gpu_hourly_price([]) is None


def test_a_given_price_is_per_gpu_and_a_cpu_service_counts_once() -> None:
    assert hourly_cost_usd(["NVIDIA A10G", "NVIDIA A10G"], 1.25) == 2.5  # any GPU, priced by the user
    assert hourly_cost_usd([], 0.4) == 0.4
    assert hourly_cost_usd(["NVIDIA A10G"], None) is None


@pytest.mark.parametrize("bad", [-1.0, float("inf"), float("nan"), "3", True])
def test_a_bad_price_is_refused_naming_the_option(bad: object) -> None:
    with pytest.raises(ValueError, match=r"gpu_cost_per_hour_usd=.*a number >= 0"):
        check_gpu_cost_per_hour_usd(bad)
    assert check_gpu_cost_per_hour_usd(None) is None and check_gpu_cost_per_hour_usd(3) == 3.0
