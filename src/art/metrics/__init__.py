"""The metrics room: what a step's metrics are and what they cost, and the reference's `art.metrics`.

- `builder`    MetricsBuilder (costs, time, data, throughput, running totals), group aggregates
- `taxonomy`   the automatic `data/step_*` metrics, metric sections and splits, key routing
- `api_costs`  per-call API costs (OpenAI, Anthropic, LiteLLM's map), `track_api_cost`
- `costs`      per-token pricing of sampling and training (`CostCalculator`, `MODEL_PRICING`)
- `gpu`        the hourly price of a service's GPUs (`costs/gpu`)

This package is also the reference's `art.metrics`: its names are re-exported here (from `builder`, and
`track_api_cost` from `api_costs`), and `__all__` below is the one list of them.
It imports only the core (`art.trajectories`).
"""

from art.metrics.api_costs import track_api_cost
from art.metrics.builder import (
    MetricsBuilder,
    builder_managed_values,
    group_metrics,
    is_builder_managed_metric,
    is_cumulative_metric_key,
    to_cumulative_metric_key,
)

__all__ = [
    "MetricsBuilder",
    "builder_managed_values",
    "group_metrics",
    "is_builder_managed_metric",
    "is_cumulative_metric_key",
    "to_cumulative_metric_key",
    "track_api_cost",
]
