"""Per-token prices of a trained model's own inference and training, and the cost calculator built from them.

A `CostCalculator` turns one completion's token counts into cost metrics for a context ("train" or
"eval"); `TrainableModel.set_cost_calculator(build_cost_calculator(pricing))` makes every chat completion
through `model.openai_client()` add them while a metrics context is active. The metric names are the
reference's (`costs/{context}/tinker_prefill`, `costs/{context}/tinker_sample`), so dashboards built on them
work. No backend here sets a calculator by itself: local GPUs have no per-token price (the reference fills
`MODEL_PRICING` with its hosted service's prices; ours starts empty).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeAlias


@dataclass(frozen=True)
class ModelPricing:
    """US dollars per million tokens: `prefill` (prompt), `sample` (generated), `train` (trained on).

    Example:
        >>> ModelPricing(prefill=0.12, sample=0.30, train=0.36).sample
        0.3
    """

    prefill: float
    sample: float
    train: float


TokenCount: TypeAlias = int | None
CostCalculator: TypeAlias = Callable[[TokenCount, TokenCount, str], dict[str, float]]

# Base model name -> pricing. Empty here (see the module); add your own for `get_model_pricing` to find.
MODEL_PRICING: dict[str, ModelPricing] = {}


def get_model_pricing(model_name: str | None, *, strict: bool = False) -> ModelPricing | None:
    """The pricing of `model_name` in `MODEL_PRICING`, or None (`strict`: a ValueError naming the table).

    Example:
        >>> get_model_pricing("no-such-model") is None
        True
    """
    if model_name is None:
        return None
    pricing = MODEL_PRICING.get(model_name)
    if pricing is None and strict:
        raise ValueError(
            f"No pricing configured for model {model_name!r}: add it to art.costs.MODEL_PRICING "
            f"(known: {sorted(MODEL_PRICING) or 'none'})"
        )
    return pricing


def tokens_to_cost(num_tokens: float, price_per_million: float) -> float:
    """US dollars for `num_tokens` at `price_per_million`.

    Example:
        >>> tokens_to_cost(2_000_000, 0.5)
        1.0
    """
    return float(num_tokens) * price_per_million / 1_000_000


def compute_sample_costs(
    *,
    prompt_tokens: int | None,
    completion_tokens: int | None,
    cost_context: str,
    pricing: ModelPricing,
) -> dict[str, float]:
    """The prompt and completion cost of one inference call, as `costs/{context}/tinker_prefill|_sample`.

    Example:
        >>> compute_sample_costs(prompt_tokens=1_000_000, completion_tokens=0, cost_context="train",
        ...                      pricing=ModelPricing(prefill=0.1, sample=0.3, train=0.3))
        {'costs/train/tinker_prefill': 0.1, 'costs/train/tinker_sample': 0.0}
    """
    context = cost_context.strip("/")
    if not context:
        raise ValueError("cost_context must be non-empty")
    return {
        f"costs/{context}/tinker_prefill": tokens_to_cost(float(prompt_tokens or 0), pricing.prefill),
        f"costs/{context}/tinker_sample": tokens_to_cost(float(completion_tokens or 0), pricing.sample),
    }


def build_cost_calculator(pricing: ModelPricing) -> CostCalculator:
    """A `CostCalculator` for `TrainableModel.set_cost_calculator`: `compute_sample_costs` at `pricing`.

    Example:
        >>> calc = build_cost_calculator(ModelPricing(prefill=1.0, sample=2.0, train=2.0))
        >>> calc(1_000_000, 500_000, "eval")
        {'costs/eval/tinker_prefill': 1.0, 'costs/eval/tinker_sample': 1.0}
    """

    def calculator(
        prompt_tokens: TokenCount, completion_tokens: TokenCount, cost_context: str
    ) -> dict[str, float]:
        return compute_sample_costs(
            prompt_tokens=prompt_tokens,
            completion_tokens=completion_tokens,
            cost_context=cost_context,
            pricing=pricing,
        )

    return calculator


def compute_train_cost(train_tokens: float, pricing: ModelPricing) -> float:
    """US dollars for training on `train_tokens` tokens at `pricing`.

    Example:
        >>> compute_train_cost(1_000_000, ModelPricing(prefill=0.1, sample=0.3, train=0.36))
        0.36
    """
    return tokens_to_cost(train_tokens, pricing.train)


__all__ = [
    "MODEL_PRICING",
    "CostCalculator",
    "ModelPricing",
    "build_cost_calculator",
    "compute_sample_costs",
    "compute_train_cost",
    "get_model_pricing",
    "tokens_to_cost",
]
