"""What a service's GPUs cost per hour, for the `costs/gpu` metric of each training step.

A price per GPU given by the user (`LocalBackend(gpu_cost_per_hour_usd=...)`, `art serve
--gpu-cost-per-hour-usd`) wins; without one, GPUs listed in `AUTO_GPU_HOURLY_PRICING_USD` (the reference's
table) are priced on their own and any other GPU gives no price rather than a guess.
"""

from __future__ import annotations

from collections.abc import Sequence

# The hourly price (USD) of GPUs known by name, used when no `gpu_cost_per_hour_usd` is given (the
# reference's table); a name matches when it contains the key ("NVIDIA H200" matches "H200").
AUTO_GPU_HOURLY_PRICING_USD: dict[str, float] = {"H200": 3.0}


def gpu_hourly_price(gpu_names: Sequence[str]) -> float | None:
    """The hourly price of these GPUs together from `AUTO_GPU_HOURLY_PRICING_USD`, or None if there are none
    or one is not listed (no guess).

    Example:
        >>> gpu_hourly_price(["NVIDIA H200", "NVIDIA H200"]), gpu_hourly_price(["NVIDIA A10G"])
        (6.0, None)
    """
    prices = []
    for name in gpu_names:
        price = next((p for key, p in AUTO_GPU_HOURLY_PRICING_USD.items() if key in name.upper()), None)
        if price is None:
            return None
        prices.append(price)
    return sum(prices) if prices else None


def check_gpu_cost_per_hour_usd(value: object) -> float | None:
    """`gpu_cost_per_hour_usd` as a float (None stays None); a ValueError naming the fix otherwise.

    Example:
        >>> check_gpu_cost_per_hour_usd(2)
        2.0
    """
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value < float("inf"):
        raise ValueError(
            f"gpu_cost_per_hour_usd={value!r}: give the hourly price in USD of one GPU (a number >= 0), or "
            "None to price known GPUs on their own"
        )
    return float(value)


def hourly_cost_usd(gpu_names: Sequence[str], gpu_cost_per_hour_usd: float | None) -> float | None:
    """The hourly cost of a service using `gpu_names`: the given price per GPU x the GPUs (a service on the
    CPU, with no GPU, counts as one device: the price of the machine), else `gpu_hourly_price`.

    Example:
        >>> hourly_cost_usd([], 0.5), hourly_cost_usd(["NVIDIA H200"], None), hourly_cost_usd([], None)
        (0.5, 3.0, None)
    """
    if gpu_cost_per_hour_usd is not None:
        return gpu_cost_per_hour_usd * max(1, len(gpu_names))
    return gpu_hourly_price(gpu_names)
