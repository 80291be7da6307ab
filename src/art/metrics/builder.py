"""The metrics `Model.log` writes to history.jsonl: aggregates of trajectory groups, and `MetricsBuilder`.

`group_metrics` sums up the groups a step logged (reward, spread, exception rate, trajectory metrics).
`MetricsBuilder` (the reference's "Tracking Metrics") collects what lives outside trajectories (costs of
judge calls, time spent, data counts) until the next `model.log(...)` writes them in its row, with:

- rollups of costs: `costs/train/llm_judge/a` and `.../b` give `costs/train/llm_judge`, `costs/train`, and
  `costs/all` over every cost of the row;
- running totals of the `costs`, `time` and `data` sections (`costs/cum/all`, `time/cum/actor_s`,
  `data/cum/num_unique_scenarios`), kept in the model's state.json so they go on across restarts;
- throughput once both sides are known (`throughput/avg_actor_tok_per_s` from `data/step_actor_tokens` and
  `time/step_actor_s`; the same for the trainer).

Get one with `model.metrics_builder()`; `track_api_cost` (art.metrics.api_costs) adds a judge's costs to
the one made active with `activate_context()`.
"""

from __future__ import annotations

import math
import threading
import time
from collections import defaultdict
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from contextvars import Token
from dataclasses import dataclass, field
from typing import Any, Unpack

from art.metrics.api_costs import (
    ACTIVE_COST_SINK,
    CostExtractor,
    CostSink,
    PricesPerMillion,
    TokenPricing,
    check_prices,
    extract_api_cost,
    normalize_model_name,
    normalize_provider,
)
from art.trajectories import TrajectoryGroup


def _std(values: Sequence[float]) -> float:
    if len(values) < 2:
        return 0.0
    mean = sum(values) / len(values)
    return math.sqrt(sum((v - mean) ** 2 for v in values) / len(values))


# What `group_metrics` names a step's mean reward and its groups' mean spread (the reference's names; the
# history prefixes them by split: `train/reward`, `val/reward_std_dev`). `art ui` charts them by default.
REWARD_KEY = "reward"
REWARD_STD_DEV_KEY = "reward_std_dev"


def group_metrics(groups: Sequence[TrajectoryGroup]) -> dict[str, float]:
    """A logged step's aggregates, under the reference's names: `reward` (the mean), `exception_rate`,
    `reward_std_dev` (the mean spread of rewards within each group of two or more trajectories: zero means
    the groups teach nothing), the mean of every trajectory metric, and the mean of every group metric over
    the groups (as `group_{name}`); plus ours, `reward_std` (the spread over all trajectories).

    Builder-managed keys (`costs/...`, `time/step_...`; see `builder_managed_values`) are summed by the
    builder instead. Counts are the builder's `data/step_num_*` (`art.metrics_taxonomy`).

    Example:
        >>> group = art.TrajectoryGroup([art.Trajectory(reward=1.0), art.Trajectory(reward=0.0)])
        >>> group_metrics([group])["reward"], group_metrics([group])["reward_std_dev"]
        (0.5, 0.5)
    """
    rewards = [t.reward for g in groups for t in g.trajectories]
    n_exc = sum(len(g.exceptions) for g in groups)
    out: dict[str, float] = {}
    if rewards:
        out[REWARD_KEY] = sum(rewards) / len(rewards)
    if rewards or n_exc:
        out["exception_rate"] = n_exc / (len(rewards) + n_exc)
    spreads = [_std([t.reward for t in g.trajectories]) for g in groups if len(g.trajectories) > 1]
    out[REWARD_STD_DEV_KEY] = sum(spreads) / len(spreads) if spreads else 0.0
    if rewards:
        out["reward_std"] = _std(rewards)
    sums: dict[str, float] = defaultdict(float)
    counts: dict[str, int] = defaultdict(int)
    for g in groups:
        for t in g.trajectories:
            for key, value in _numbers(t.metrics):
                if not is_builder_managed_metric(key):
                    sums[key] += value
                    counts[key] += 1
    for key, total in sums.items():
        if key not in out:
            out[key] = total / counts[key]
    group_sums: dict[str, float] = defaultdict(float)
    group_counts: dict[str, int] = defaultdict(int)
    for g in groups:
        if g.trajectories:  # a group of failed rollouts only has no say in the group means
            for key, value in _numbers(g.metrics):
                if not is_builder_managed_metric(key):
                    group_sums[key] += value
                    group_counts[key] += 1
    for key, total in group_sums.items():
        out.setdefault(f"group_{key}", total / group_counts[key])
    return out


def builder_managed_values(groups: Sequence[TrajectoryGroup]) -> list[tuple[str, float]]:
    """The `costs/...`, `time/step_...`, `data/step_...` and `throughput/step_...` values that groups and
    trajectories carry in their metrics: `Model.log` adds them to the step's `MetricsBuilder`, so they are
    summed over the step (a judge's cost per trajectory gives the step's cost), not averaged.

    Example:
        >>> t = art.Trajectory(reward=1.0, metrics={"costs/train/judge": 0.002, "turns": 3})
        >>> builder_managed_values([art.TrajectoryGroup([t, t.model_copy()])])
        [('costs/train/judge', 0.002), ('costs/train/judge', 0.002)]
    """
    values: list[tuple[str, float]] = []
    for g in groups:
        values += [(k, v) for k, v in _numbers(g.metrics) if is_builder_managed_metric(k)]
        for t in g.trajectories:
            values += [(k, v) for k, v in _numbers(t.metrics) if is_builder_managed_metric(k)]
    return values


def _numbers(metrics: Mapping[str, object]) -> list[tuple[str, float]]:
    """The finite numbers of a metrics dict (booleans count as 0/1, as in the reference)."""
    return [
        (key, float(value))
        for key, value in metrics.items()
        if isinstance(value, int | float) and math.isfinite(float(value))
    ]


# ---- MetricsBuilder ---------------------------------------------------------------------------------

_CUMULATIVE_SECTIONS = ("costs", "time", "data")  # summed over steps into `{section}/cum/...`
_IDLE_TOTALS = {
    "throughput/step_trainer_idle_s": "throughput/cum/trainer_idle_s",
    "throughput/step_actor_idle_s": "throughput/cum/actor_idle_s",
}


def is_cumulative_metric_key(key: str) -> bool:
    """Whether `key` is a running total (`{section}/cum/...`), which only the builder writes.

    Example:
        >>> is_cumulative_metric_key("costs/cum/all"), is_cumulative_metric_key("costs/all")
        (True, False)
    """
    parts = key.split("/", 2)
    return len(parts) >= 2 and parts[1] == "cum"


def is_builder_managed_metric(key: str) -> bool:
    """Whether `Model.log` hands `key` to the builder (summed in its step, totals kept) rather than as is.

    Example:
        >>> is_builder_managed_metric("time/step_actor_s"), is_builder_managed_metric("train/loss")
        (True, False)
    """
    return key.startswith(("costs/", "time/step_", "data/step_", "throughput/step_"))


def to_cumulative_metric_key(key: str) -> str:
    """The running-total key of a step key: `time/step_actor_s` -> `time/cum/actor_s`.

    Example:
        >>> to_cumulative_metric_key("costs/train/judge")
        'costs/cum/train/judge'
    """
    if is_cumulative_metric_key(key):
        raise ValueError(f"metric key {key!r} is already cumulative")
    section, rest = key.split("/", 1)
    return f"{section}/cum/{rest.removeprefix('step_')}"


@dataclass
class _Pending:
    values: dict[str, float] = field(default_factory=dict)
    scenario_ids: set[str] = field(default_factory=set)


@dataclass
class _Shared:
    """What every builder of one model shares: pending steps by scope, totals, prices."""

    lock: threading.Lock = field(default_factory=threading.Lock)  # adds may come from worker threads too
    pending: dict[str, _Pending] = field(default_factory=dict)
    totals: dict[str, float] = field(default_factory=dict)
    scenario_ids: set[str] = field(default_factory=set)
    extractors: dict[str, CostExtractor] = field(default_factory=dict)
    pricing: dict[str, TokenPricing] = field(default_factory=dict)

    def __getstate__(self) -> dict[str, Any]:  # a lock cannot be copied or pickled: a copy gets its own
        return {k: v for k, v in self.__dict__.items() if k != "lock"}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self.lock = threading.Lock()


class MetricsBuilder:
    """Step metrics outside trajectories (costs, timings, data counts), written by the next `model.log`.

    `cost_context` ("train" or "eval") names where costs go: `add_response_cost("judge", r)` adds
    `costs/{cost_context}/judge`. Builders made by `for_cost_context` share totals and prices; each keeps
    its own pending step (the "train" one is flushed by `log(split="train")`, "eval" by "val" or "test").

    Example:
        builder = model.metrics_builder()
        with builder.measure("time/step_actor_s"):
            groups = await gather_groups()
        builder.add_data(step_actor_tokens=12_000, scenario_ids=["s1", "s2"])
        await model.log(groups, split="train")  # the row has time/step_actor_s, data/cum/..., throughput/...
    """

    def __init__(
        self, cost_context: str, *, _shared_state: _Shared | None = None, _buffer_scope: str | None = None
    ) -> None:
        if not cost_context or not cost_context.strip():
            raise ValueError("cost_context must be non-empty")
        self.cost_context = cost_context
        self._scope = _buffer_scope if _buffer_scope is not None else cost_context
        self._shared = _shared_state if _shared_state is not None else _Shared()

    def __repr__(self) -> str:
        return f"MetricsBuilder(cost_context={self.cost_context!r})"

    # ---- adding ----------------------------------------------------------------------------------
    def add_metric(self, key: str, value: float) -> None:
        """Add `value` to `key` (`section/name`) in this step; values added to one key in one step are summed.

        Example:
            builder.add_metric("time/step_judge_s", 1.5)
        """
        if "/" not in key:
            raise ValueError(f"metric key {key!r} must have a section prefix, e.g. 'time/{key}'")
        number = float(value)
        if not math.isfinite(number):
            raise ValueError(f"metric {key!r} must be a finite number, got {value!r}")
        if is_cumulative_metric_key(key):
            raise ValueError(f"metric key {key!r} is in the cumulative namespace, which the builder writes")
        with self._shared.lock:
            pending = self._pending()
            for other in pending.values:
                if other.startswith(f"{key}/"):
                    raise ValueError(f"cannot log {key!r} as a value: it is a parent of {other!r}")
                if key.startswith(f"{other}/"):
                    raise ValueError(f"cannot log {key!r}: its parent {other!r} already has a value")
            pending.values[key] = pending.values.get(key, 0.0) + number

    def add_cost(self, path: str, usd: float) -> None:
        """Add `usd` to `costs/{path}` in this step (the path usually starts with the context).

        Example:
            builder.add_cost("train/gpu", usd=0.42)
        """
        if not path or not path.strip("/"):
            raise ValueError("cost path must be non-empty")
        self.add_metric(f"costs/{path.strip('/')}", usd)

    def add_response_cost(
        self,
        source: str,
        response: Any,
        *,
        provider: str,
        model_name: str,
        **prices: Unpack[PricesPerMillion],
    ) -> float | None:
        """Price a provider response (OpenAI or Anthropic usage) and add it as `costs/{context}/{source}`.

        Returns the cost. An unknown model is a ValueError naming `register_model_pricing`.

        Example:
            cost = builder.add_response_cost("llm_judge/ruler", response, provider="openai",
                                             model_name="openai/gpt-4.1")
        """
        check_prices("add_response_cost", prices)
        name = source.strip("/")
        if not name:
            raise ValueError("source must be non-empty")
        cost = extract_api_cost(
            response,
            provider=provider,
            model_name=model_name,
            cost_extractors=self._shared.extractors,
            model_pricing=self._shared.pricing,
            **prices,
        )
        if cost is None:
            return None
        self.add_cost(f"{self.cost_context.strip('/')}/{name}", cost)
        return cost

    def add_data(
        self,
        step_num_scenarios: int | None = None,
        step_actor_tokens: int | None = None,
        scenario_ids: list[str] | None = None,
    ) -> None:
        """Count this step's data: `data/step_num_scenarios`, `data/step_actor_tokens`, and scenario ids
        (for `data/cum/num_unique_scenarios`).

        Example:
            builder.add_data(step_num_scenarios=8, step_actor_tokens=20_000, scenario_ids=ids)
        """
        if step_num_scenarios is not None:
            self.add_metric("data/step_num_scenarios", float(step_num_scenarios))
        if step_actor_tokens is not None:
            self.add_metric("data/step_actor_tokens", float(step_actor_tokens))
        if scenario_ids is not None:
            with self._shared.lock:
                self._pending().scenario_ids.update(str(i) for i in scenario_ids)

    def add_user_timing(
        self,
        step_wall_s: float | None = None,
        step_actor_s: float | None = None,
        step_eval_s: float | None = None,
    ) -> None:
        """Add seconds to `time/step_wall_s`, `time/step_actor_s`, `time/step_eval_s`.

        Example:
            builder.add_user_timing(step_actor_s=12.5)
        """
        for key, value in (("wall_s", step_wall_s), ("actor_s", step_actor_s), ("eval_s", step_eval_s)):
            if value is not None:
                self.add_metric(f"time/step_{key}", float(value))

    def add_idle_times(
        self, step_trainer_idle_s: float | None = None, step_actor_idle_s: float | None = None
    ) -> None:
        """Add idle seconds (`throughput/step_trainer_idle_s`, `throughput/step_actor_idle_s`); totals follow.

        Example:
            builder.add_idle_times(step_actor_idle_s=3.0)
        """
        if step_trainer_idle_s is not None:
            self.add_metric("throughput/step_trainer_idle_s", float(step_trainer_idle_s))
        if step_actor_idle_s is not None:
            self.add_metric("throughput/step_actor_idle_s", float(step_actor_idle_s))

    @contextmanager
    def measure(self, key: str) -> Iterator[None]:
        """Add the seconds the block takes to `key` (also when it raises).

        Example:
            with builder.measure("time/step_actor_s"):
                groups = await gather_groups()
        """
        started = time.monotonic()
        try:
            yield
        finally:
            self.add_metric(key, time.monotonic() - started)

    # ---- writing a step --------------------------------------------------------------------------
    async def flush(self) -> dict[str, float]:
        """This scope's pending step with its rollups, running totals and throughput; the step starts over.

        `Model.log` calls it; call it yourself only with a builder of your own.

        Example:
            row = await builder.flush()  # e.g. {"costs/train/judge": 0.1, "costs/train": 0.1, ...}
        """
        with self._shared.lock:
            return self._flush_locked()

    def _flush_locked(self) -> dict[str, float]:
        shared = self._shared
        pending = self._pending()
        row = dict(pending.values)
        costs = {k: v for k, v in row.items() if k.startswith("costs/")}
        if costs:  # a parent is never a leaf too (`add_metric` refuses it), so the sums cannot collide
            rollups: dict[str, float] = defaultdict(float)
            for key, value in costs.items():
                parts = key.split("/")
                for depth in range(2, len(parts)):
                    rollups["/".join(parts[:depth])] += value
            row.update(rollups)
            row["costs/all"] = sum(costs.values())
        for key, value in list(row.items()):
            if key.split("/", 1)[0] in _CUMULATIVE_SECTIONS:
                total_key = to_cumulative_metric_key(key)
                row[total_key] = shared.totals[total_key] = shared.totals.get(total_key, 0.0) + value
        for key, total_key in _IDLE_TOTALS.items():
            if key in row:
                row[total_key] = shared.totals[total_key] = shared.totals.get(total_key, 0.0) + row[key]
        if pending.scenario_ids:
            shared.scenario_ids |= pending.scenario_ids
            row["data/cum/num_unique_scenarios"] = float(len(shared.scenario_ids))
        for side in ("trainer", "actor"):
            if f"data/step_{side}_tokens" in row or f"time/step_{side}_s" in row:
                tokens = shared.totals.get(f"data/cum/{side}_tokens")
                seconds = shared.totals.get(f"time/cum/{side}_s")
                if tokens is not None and seconds:
                    row[f"throughput/avg_{side}_tok_per_s"] = tokens / seconds
        pending.values.clear()
        pending.scenario_ids.clear()
        return row

    # ---- contexts --------------------------------------------------------------------------------
    def activate(self) -> Token[CostSink]:
        """Make this builder the active one (where `track_api_cost` adds costs); returns the token to reset.

        Example:
            token = builder.activate()
            try:
                await judge(...)
            finally:
                token.var.reset(token)
        """
        return ACTIVE_COST_SINK.set(self)

    @contextmanager
    def activate_context(self) -> Iterator[MetricsBuilder]:
        """`activate()` for the block (the builder before it is active again after).

        Example:
            with model.metrics_builder("eval").activate_context():
                await judge(...)
        """
        token = self.activate()
        try:
            yield self
        finally:
            token.var.reset(token)

    @staticmethod
    def get_active() -> MetricsBuilder:
        """The active builder; LookupError when none is.

        Example:
            with builder.activate_context():
                assert MetricsBuilder.get_active() is builder
        """
        active = ACTIVE_COST_SINK.get()
        assert isinstance(active, MetricsBuilder), active  # only a builder activates itself
        return active

    def for_cost_context(self, cost_context: str, *, buffer_scope: str | None = None) -> MetricsBuilder:
        """A builder for `cost_context` sharing this one's totals and prices (itself if nothing changes).

        Example:
            eval_builder = builder.for_cost_context("eval")
        """
        context = cost_context.strip()
        if not context:
            raise ValueError("cost_context must be non-empty")
        scope = buffer_scope.strip() if buffer_scope is not None else context
        if not scope:
            raise ValueError("buffer_scope must be non-empty")
        if context == self.cost_context and scope == self._scope:
            return self
        return MetricsBuilder(context, _shared_state=self._shared, _buffer_scope=scope)

    # ---- prices ----------------------------------------------------------------------------------
    def register_cost_extractor(self, provider: str, extractor: CostExtractor) -> None:
        """Price `provider`'s responses with `extractor(response) -> US$ | None` (None: use token prices).

        Example:
            builder.register_cost_extractor("gemini", lambda r: r.usage_metadata.total_token_count * 1e-7)
        """
        name = normalize_provider(provider)
        if name is None:
            raise ValueError("provider must be non-empty")
        self._shared.extractors[name] = extractor

    def register_model_pricing(
        self,
        model_name: str,
        *,
        prompt_per_million: float,
        completion_per_million: float,
        cached_prompt_per_million: float | None = None,
        cache_creation_per_million: float | None = None,
        cache_read_per_million: float | None = None,
    ) -> None:
        """Set the US$-per-million-token prices of `model_name` (the name given to `track_api_cost`).

        Example:
            builder.register_model_pricing("anthropic/my-judge", prompt_per_million=1.2,
                                           completion_per_million=4.8)
        """
        name = normalize_model_name(model_name)
        if name is None:
            raise ValueError("model_name must be non-empty")

        def price(value: float | None) -> float | None:
            return None if value is None else float(value)

        self._shared.pricing[name] = TokenPricing(
            prompt_per_million=float(prompt_per_million),
            completion_per_million=float(completion_per_million),
            cached_prompt_per_million=price(cached_prompt_per_million),
            cache_creation_per_million=price(cache_creation_per_million),
            cache_read_per_million=price(cache_read_per_million),
        )

    # ---- persistence -----------------------------------------------------------------------------
    def state_dict(self) -> dict[str, Any]:
        """The running totals and the scenario ids seen, as JSON values (what state.json keeps).

        Example:
            saved = builder.state_dict()  # {"cum_state": {...}, "unique_scenario_ids": [...]}
        """
        with self._shared.lock:
            return {
                "cum_state": dict(self._shared.totals),
                "unique_scenario_ids": sorted(self._shared.scenario_ids),
            }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Replace the running totals and scenario ids with `state`'s; pending steps are dropped.

        Example:
            builder.load_state_dict(saved)
        """
        self._load(state, keep_pending=False)

    def _load(self, state: dict[str, Any], *, keep_pending: bool) -> None:
        totals = {str(k): float(v) for k, v in dict(state.get("cum_state") or {}).items()}
        ids = {str(i) for i in state.get("unique_scenario_ids") or []}
        with self._shared.lock:
            self._shared.totals = totals
            self._shared.scenario_ids = ids
            if not keep_pending:
                self._shared.pending.clear()

    def _pending(self) -> _Pending:
        return self._shared.pending.setdefault(self._scope, _Pending())
