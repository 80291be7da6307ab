"""Per-token prices of a trained model's own inference and training, and the cost calculator built from them.

A `CostCalculator` turns one completion's token counts into cost metrics for a context ("train" or
"eval"); `TrainableModel.set_cost_calculator(build_cost_calculator(pricing))` makes every chat completion
through `model.openai_client()` add them while a metrics context is active. The metric names are the
reference's (`costs/{context}/tinker_prefill`, `costs/{context}/tinker_sample`), so dashboards built on them
work. No backend here sets a calculator by itself: local GPUs have no per-token price. `MODEL_PRICING` holds
the reference's table of its hosted service's prices (Tinker's), for code that looks prices up there.
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

# Base model name -> pricing: the reference's table (Tinker's published hosted prices, US$ per million
# prefill, sample and train tokens), so code that prices by it gets the same numbers; add your own.
MODEL_PRICING: dict[str, ModelPricing] = {
    "Qwen/Qwen3.6-35B-A3B": ModelPricing(0.36, 0.89, 1.07),
    "Qwen/Qwen3.6-27B": ModelPricing(1.24, 3.73, 3.73),
    "Qwen/Qwen3.5-4B": ModelPricing(0.22, 0.67, 0.67),
    "Qwen/Qwen3.5-27B": ModelPricing(1.24, 3.73, 3.73),
    "Qwen/Qwen3.5-35B-A3B": ModelPricing(0.36, 0.89, 1.07),
    "Qwen/Qwen3.5-397B-A17B": ModelPricing(2.0, 5.0, 6.0),
    "Qwen/Qwen3.5-397B-A17B:peft:262144": ModelPricing(4.0, 10.0, 12.0),
    "Qwen/Qwen3-4B-Instruct-2507": ModelPricing(0.07, 0.22, 0.22),
    "Qwen/Qwen3-8B": ModelPricing(0.13, 0.4, 0.4),
    "Qwen/Qwen3-8B-Base": ModelPricing(0.13, 0.4, 0.4),
    "Qwen/Qwen3-30B-A3B": ModelPricing(0.12, 0.3, 0.36),
    "Qwen/Qwen3-30B-A3B-Base": ModelPricing(0.12, 0.3, 0.36),
    "Qwen/Qwen3-30B-A3B-Instruct-2507": ModelPricing(0.12, 0.3, 0.36),
    "Qwen/Qwen3-32B": ModelPricing(0.49, 1.47, 1.47),
    "Qwen/Qwen3-235B-A22B-Instruct-2507": ModelPricing(0.68, 1.7, 2.04),
    "Qwen/Qwen3-VL-30B-A3B-Instruct": ModelPricing(0.18, 0.44, 0.53),
    "Qwen/Qwen3-VL-235B-A22B-Instruct": ModelPricing(1.02, 2.56, 3.07),
    "meta-llama/Llama-3.2-1B": ModelPricing(0.03, 0.09, 0.09),
    "meta-llama/Llama-3.2-3B": ModelPricing(0.06, 0.18, 0.18),
    "meta-llama/Llama-3.1-8B": ModelPricing(0.13, 0.4, 0.4),
    "meta-llama/Llama-3.1-8B-Instruct": ModelPricing(0.13, 0.4, 0.4),
    "meta-llama/Llama-3.1-70B": ModelPricing(1.05, 3.16, 3.16),
    "meta-llama/Llama-3.3-70B-Instruct": ModelPricing(1.05, 3.16, 3.16),
    "deepseek-ai/DeepSeek-V3.1": ModelPricing(1.13, 2.81, 3.38),
    "deepseek-ai/DeepSeek-V3.1-Base": ModelPricing(1.13, 2.81, 3.38),
    "openai/gpt-oss-120b": ModelPricing(0.18, 0.44, 0.52),
    "openai/gpt-oss-120b:peft:131072": ModelPricing(0.63, 1.54, 1.82),
    "openai/gpt-oss-20b": ModelPricing(0.12, 0.3, 0.36),
    "moonshotai/Kimi-K2-Thinking": ModelPricing(0.98, 2.44, 2.93),
    "moonshotai/Kimi-K2.5": ModelPricing(1.47, 3.66, 4.4),
    "moonshotai/Kimi-K2.5:peft:131072": ModelPricing(5.15, 12.81, 15.4),
    "moonshotai/Kimi-K2.6": ModelPricing(1.47, 3.66, 4.4),
    "moonshotai/Kimi-K2.6:peft:131072": ModelPricing(5.15, 12.81, 15.4),
    "nvidia/NVIDIA-Nemotron-3-Nano-30B-A3B-BF16": ModelPricing(0.13, 0.33, 0.4),
    "nvidia/NVIDIA-Nemotron-3-Super-120B-A12B-BF16": ModelPricing(0.38, 0.96, 1.16),
    "nvidia/NVIDIA-Nemotron-3-Super-120B-A12B-BF16:peft:262144": ModelPricing(0.76, 1.92, 2.32),
}


def get_model_pricing(model_name: str | None, *, strict: bool = False) -> ModelPricing | None:
    """The pricing of `model_name` in `MODEL_PRICING`, or None (`strict`: a ValueError naming the table).

    Example:
        >>> get_model_pricing("no-such-model") is None, get_model_pricing("openai/gpt-oss-20b").sample
        (True, 0.3)
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
