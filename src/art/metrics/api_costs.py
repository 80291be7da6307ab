"""What a call to a hosted model (an LLM judge, a teacher, a tool) cost, from the usage in its response.

`track_api_cost` decorates the function that makes the call; while a metrics context is active
(`with model.metrics_builder("train").activate_context():`) each response's cost is added to the step's
metrics as `costs/{context}/{source}`, and `Model.log` writes it with the rollups (`costs/train`,
`costs/all`) and running totals (`costs/cum/all`). Outside a context the decorator does nothing.

A cost is found, in this order: a cost the response states itself (`usage.cost`, as OpenRouter and
LiteLLM's proxy report it), a cost extractor registered for the provider, then token counts times a price.
Prices come from explicit `*_price_per_million` arguments, `MetricsBuilder.register_model_pricing`, the
small table `MODEL_TOKEN_PRICING` below, then LiteLLM's model map when LiteLLM is installed (the `judge`
extra; its bundled map, as the reference falls back to it), then `art.costs.MODEL_PRICING` (prefill and
sample prices); a model in none of them is an error that names the fix. Nothing here reaches the network.
"""

from __future__ import annotations

import importlib.util
import math
from collections.abc import Awaitable, Callable, Mapping
from contextvars import ContextVar
from dataclasses import dataclass
from functools import wraps
from inspect import iscoroutinefunction
from typing import Any, ParamSpec, Protocol, TypedDict, TypeVar, Unpack, cast

from art.common.offline_litellm import import_litellm
from art.metrics.costs import get_model_pricing

OPENAI_PROVIDER = "openai"
ANTHROPIC_PROVIDER = "anthropic"

P = ParamSpec("P")
R = TypeVar("R")

CostExtractor = Callable[[Any], float | None]
ResponseGetter = Callable[[Any], Any]


class PricesPerMillion(TypedDict, total=False):
    """The token prices (US$ per million) a caller may name itself, each winning over the model's in the
    tables; None or unset: the tables' price. The one list of the keyword arguments that `extract_api_cost`,
    `track_api_cost` and `MetricsBuilder.add_response_cost` take as `**prices`.

    Example:
        @track_api_cost(source="judge", provider="openai", model_name="openai/my-finetune",
                        prompt_price_per_million=0.3, completion_price_per_million=1.2)
        async def judge(client, messages): ...
    """

    prompt_price_per_million: float | None
    completion_price_per_million: float | None
    cached_prompt_price_per_million: float | None  # OpenAI: prompt tokens served from its cache
    cache_creation_price_per_million: float | None  # Anthropic: tokens written to the cache
    cache_read_price_per_million: float | None  # Anthropic: tokens read from the cache


def check_prices(function: str, prices: Mapping[str, object]) -> None:
    """TypeError for a keyword in `prices` that is not a price, as Python's own for an unknown keyword
    argument of `function`: `**prices` would otherwise swallow a misspelt one."""
    for name in prices:
        if name not in PricesPerMillion.__optional_keys__:
            raise TypeError(f"{function}() got an unexpected keyword argument {name!r}")


class CostSink(Protocol):
    """Where `track_api_cost` adds a priced response: the active `MetricsBuilder` (art.metrics.builder)."""

    def add_response_cost(
        self,
        source: str,
        response: Any,
        *,
        provider: str,
        model_name: str,
        **prices: Unpack[PricesPerMillion],
    ) -> float | None:
        """Price `response` and add it as `costs/{context}/{source}`."""
        ...


# The active cost sink: `MetricsBuilder.activate()` sets it. It lives here, below the builder, so that this
# module never imports the builder (the builder imports this module for its prices).
ACTIVE_COST_SINK: ContextVar[CostSink] = ContextVar("art_active_metrics_builder")


@dataclass(frozen=True)
class TokenPricing:
    """US dollars per million tokens of one model; unset cache prices fall back to the prompt price.

    Example:
        >>> TokenPricing(prompt_per_million=2.0, completion_per_million=8.0).cached_prompt_per_million is None
        True
    """

    prompt_per_million: float
    completion_per_million: float
    cached_prompt_per_million: float | None = None  # OpenAI: prompt tokens served from its cache
    cache_creation_per_million: float | None = None  # Anthropic: tokens written to the cache
    cache_read_per_million: float | None = None  # Anthropic: tokens read from the cache


# Every Claude Sonnet from 4.0 to 4.6 has had the same list price.
_CLAUDE_SONNET = TokenPricing(3.0, 15.0, cache_creation_per_million=3.75, cache_read_per_million=0.3)

# List prices (US$ per million tokens) of common judge models, as published by the providers in 2025.
# Prices change: register your own with `MetricsBuilder.register_model_pricing`, which wins over this table.
MODEL_TOKEN_PRICING: dict[str, TokenPricing] = {
    "openai/gpt-4.1": TokenPricing(2.0, 8.0, cached_prompt_per_million=0.5),
    "openai/gpt-4.1-mini": TokenPricing(0.4, 1.6, cached_prompt_per_million=0.1),
    "openai/gpt-4.1-nano": TokenPricing(0.1, 0.4, cached_prompt_per_million=0.025),
    "openai/gpt-4o": TokenPricing(2.5, 10.0, cached_prompt_per_million=1.25),
    "openai/gpt-4o-mini": TokenPricing(0.15, 0.6, cached_prompt_per_million=0.075),
    "openai/o3": TokenPricing(2.0, 8.0, cached_prompt_per_million=0.5),
    "openai/o4-mini": TokenPricing(1.1, 4.4, cached_prompt_per_million=0.275),
    "openai/gpt-5": TokenPricing(1.25, 10.0, cached_prompt_per_million=0.125),
    "openai/gpt-5-mini": TokenPricing(0.25, 2.0, cached_prompt_per_million=0.025),
    "openai/gpt-5-nano": TokenPricing(0.05, 0.4, cached_prompt_per_million=0.005),
    "anthropic/claude-opus-4-1": TokenPricing(
        15.0, 75.0, cache_creation_per_million=18.75, cache_read_per_million=1.5
    ),
    "anthropic/claude-sonnet-4-6": _CLAUDE_SONNET,
    "anthropic/claude-sonnet-4-5": _CLAUDE_SONNET,
    "anthropic/claude-sonnet-4-0": _CLAUDE_SONNET,
    "anthropic/claude-haiku-4-5": TokenPricing(
        1.0, 5.0, cache_creation_per_million=1.25, cache_read_per_million=0.1
    ),
    "anthropic/claude-3-5-haiku": TokenPricing(
        0.8, 4.0, cache_creation_per_million=1.0, cache_read_per_million=0.08
    ),
}


def normalize_provider(provider: str | None) -> str | None:
    """The provider's name stripped and lower-cased, or None when empty.

    Example:
        >>> normalize_provider(" OpenAI ")
        'openai'
    """
    name = normalize_model_name(provider)  # stripped, None when empty: as a model name
    return None if name is None else name.lower()


def normalize_model_name(model_name: str | None) -> str | None:
    """The model name stripped, or None when empty.

    Example:
        >>> normalize_model_name(" openai/gpt-4.1 ")
        'openai/gpt-4.1'
    """
    if model_name is None:
        return None
    return model_name.strip() or None


def _provider_and_model(provider: str, model_name: str) -> tuple[str, str]:
    """`provider` and `model_name` normalized; a ValueError names the first that is empty."""
    provider_name = normalize_provider(provider)
    if provider_name is None:
        raise ValueError("provider must be non-empty")
    name = normalize_model_name(model_name)
    if name is None:
        raise ValueError("model_name must be non-empty")
    return provider_name, name


def _field(container: Any, *path: str) -> Any:
    """`container.a.b` or `container["a"]["b"]`, whichever each level is; None when missing."""
    for name in path:
        if container is None:
            return None
        container = container.get(name) if isinstance(container, Mapping) else getattr(container, name, None)
    return container


def _number(value: Any) -> float | None:
    if value is None or isinstance(value, bool):
        return None
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return number if math.isfinite(number) else None


def _stated_cost(response: Any) -> float | None:
    """A cost the response reports itself (OpenRouter's `usage.cost`, LiteLLM's response-cost header)."""
    for value in (
        _field(response, "usage", "cost"),
        _field(response, "usage", "model_extra", "cost"),
        _field(response, "_hidden_params", "additional_headers", "llm_provider-x-litellm-response-cost"),
    ):
        cost = _number(value)
        if cost is None:
            cost = _number(_field(value, "total_cost"))  # OpenRouter's detailed form
        if cost is not None:
            return cost
    return None


def _per_million(tokens: float, price: float) -> float:
    return tokens * price / 1_000_000


def _openai_cost(response: Any, pricing: TokenPricing) -> float | None:
    usage = _field(response, "usage")
    prompt = _number(_field(usage, "prompt_tokens"))
    completion = _number(_field(usage, "completion_tokens"))
    cached = _number(_field(usage, "prompt_tokens_details", "cached_tokens"))
    if prompt is None and completion is None:  # the Responses API names them input/output
        prompt = _number(_field(usage, "input_tokens"))
        completion = _number(_field(usage, "output_tokens"))
        cached = _number(_field(usage, "input_tokens_details", "cached_tokens"))
    if prompt is None and completion is None and not cached:
        return None
    prompt = prompt or 0.0
    cached = min(cached or 0.0, prompt)
    cached_price = pricing.cached_prompt_per_million
    return (
        _per_million(prompt - cached, pricing.prompt_per_million)
        + _per_million(cached, pricing.prompt_per_million if cached_price is None else cached_price)
        + _per_million(completion or 0.0, pricing.completion_per_million)
    )


def _anthropic_cost(response: Any, pricing: TokenPricing) -> float | None:
    usage = _field(response, "usage")
    counts = [
        _number(_field(usage, name))
        for name in (
            "input_tokens",
            "output_tokens",
            "cache_creation_input_tokens",
            "cache_read_input_tokens",
        )
    ]
    if all(c is None or (i >= 2 and c == 0.0) for i, c in enumerate(counts)):
        return None
    inputs, outputs, written, read = (c or 0.0 for c in counts)
    write_price = pricing.cache_creation_per_million
    read_price = pricing.cache_read_per_million
    return (
        _per_million(inputs, pricing.prompt_per_million)
        + _per_million(written, pricing.prompt_per_million if write_price is None else write_price)
        + _per_million(read, pricing.prompt_per_million if read_price is None else read_price)
        + _per_million(outputs, pricing.completion_per_million)
    )


def _table_pricing(
    provider: str, model_name: str, registered: Mapping[str, TokenPricing]
) -> TokenPricing | None:
    names = [model_name]
    if "/" not in model_name:  # "gpt-4.1" with provider "openai" is "openai/gpt-4.1"
        names.append(f"{provider}/{model_name}")
    for table in (registered, MODEL_TOKEN_PRICING):
        for name in names:
            if name in table:
                return table[name]
    for name in names:  # then LiteLLM's price map, as the reference falls back to it
        pricing = litellm_token_pricing(name)
        if pricing is not None:
            return pricing
    for name in names:  # then the reference's hosted prices (`art.costs.MODEL_PRICING`)
        hosted = get_model_pricing(name)
        if hosted is not None:
            return TokenPricing(hosted.prefill, hosted.sample)
    return None


def _per_token_to_per_million(info: Mapping[str, Any], key: str) -> float | None:
    value = info.get(key)
    if value is None or isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value) * 1_000_000


def litellm_token_pricing(model_name: str) -> TokenPricing | None:
    """`model_name`'s prices from LiteLLM's model map (`litellm.get_model_info`), or None when LiteLLM is
    not installed (the `judge` extra) or does not know the model or its input and output prices.

    LiteLLM is imported on first use, with its bundled price map (`LITELLM_LOCAL_MODEL_COST_MAP`, so the
    import never reaches the network).

    Example:
        >>> litellm_token_pricing("openai/gpt-4o").prompt_per_million  # doctest: +SKIP
        2.5
    """
    if importlib.util.find_spec("litellm") is None:
        return None
    try:
        litellm = import_litellm()
        info = litellm.get_model_info(model_name)
    except Exception:  # LiteLLM raises for a model it does not know
        return None
    if not isinstance(info, Mapping):
        return None
    prompt = _per_token_to_per_million(info, "input_cost_per_token")
    completion = _per_token_to_per_million(info, "output_cost_per_token")
    if prompt is None or completion is None:
        return None
    cache_read = _per_token_to_per_million(info, "cache_read_input_token_cost")
    return TokenPricing(
        prompt,
        completion,
        cached_prompt_per_million=cache_read,
        cache_creation_per_million=_per_token_to_per_million(info, "cache_creation_input_token_cost"),
        cache_read_per_million=cache_read,
    )


def _resolve_pricing(
    provider: str, model_name: str, registered: Mapping[str, TokenPricing], prices: PricesPerMillion
) -> TokenPricing:
    """The table's pricing of the model (`_table_pricing`), each price the caller names winning over it; an
    unknown model needs at least its prompt and completion prices named (ValueError otherwise)."""
    prompt = prices.get("prompt_price_per_million")
    completion = prices.get("completion_price_per_million")
    base = _table_pricing(provider, model_name, registered)
    if base is None:
        if prompt is None or completion is None:
            raise ValueError(
                f"No pricing configured for model {model_name!r} (provider {provider!r}; LiteLLM's model map "
                "does not have it either, or LiteLLM is not installed). Register it: "
                f"model.metrics_builder().register_model_pricing({model_name!r}, prompt_per_million=..., "
                "completion_per_million=...), or pass prompt_price_per_million= and "
                "completion_price_per_million= to track_api_cost"
            )
        base = TokenPricing(prompt, completion)

    def pick(explicit: float | None, default: float | None) -> float | None:
        return float(explicit) if explicit is not None else default

    return TokenPricing(
        prompt_per_million=base.prompt_per_million if prompt is None else float(prompt),
        completion_per_million=base.completion_per_million if completion is None else float(completion),
        cached_prompt_per_million=pick(
            prices.get("cached_prompt_price_per_million"), base.cached_prompt_per_million
        ),
        cache_creation_per_million=pick(
            prices.get("cache_creation_price_per_million"), base.cache_creation_per_million
        ),
        cache_read_per_million=pick(prices.get("cache_read_price_per_million"), base.cache_read_per_million),
    )


def extract_api_cost(
    response: Any,
    *,
    provider: str,
    model_name: str,
    cost_extractors: Mapping[str, CostExtractor] | None = None,
    model_pricing: Mapping[str, TokenPricing] | None = None,
    **prices: Unpack[PricesPerMillion],
) -> float | None:
    """The US$ cost of one provider response (an object or a dict with `usage`); errors name what is missing.

    Example:
        >>> response = {"usage": {"prompt_tokens": 1000, "completion_tokens": 500}}
        >>> round(extract_api_cost(response, provider="openai", model_name="openai/gpt-4.1"), 6)
        0.006
    """
    check_prices("extract_api_cost", prices)
    provider_name, name = _provider_and_model(provider, model_name)

    stated = _stated_cost(response)
    if stated is not None:
        return stated
    extractor = (cost_extractors or {}).get(provider_name)
    if extractor is not None:
        custom = extractor(response)
        if custom is not None:
            return float(custom)
    if provider_name not in (OPENAI_PROVIDER, ANTHROPIC_PROVIDER):
        raise ValueError(
            f"No cost extractor registered for provider {provider_name!r}: token prices are known for "
            "'openai' and 'anthropic' responses; register one with MetricsBuilder.register_cost_extractor()"
        )
    pricing = _resolve_pricing(provider_name, name, model_pricing or {}, prices)
    estimate = _openai_cost if provider_name == OPENAI_PROVIDER else _anthropic_cost
    cost = estimate(response, pricing)
    if cost is None:
        raise ValueError(
            f"Response usage does not match provider {provider_name!r} (no token counts found in its "
            "`usage`); pass the right provider, a response_getter, or register a custom cost extractor"
        )
    return cost


def track_api_cost(
    *,
    source: str,
    provider: str,
    model_name: str,
    response_getter: ResponseGetter | None = None,
    **prices: Unpack[PricesPerMillion],
) -> Callable[[Callable[P, R]], Callable[P, R]]:
    """Decorate a function (sync or async) that returns a provider response: its cost is added to the active
    metrics context as `costs/{context}/{source}`. `response_getter` finds the response in what it returns.

    Example:
        @track_api_cost(source="llm_judge/correctness", provider="openai", model_name="openai/gpt-4.1")
        async def judge(client, messages):
            return await client.chat.completions.create(model="gpt-4.1", messages=messages)

        with model.metrics_builder("train").activate_context():
            await judge(client, messages)  # the next train row has costs/train/llm_judge/correctness
    """
    check_prices("track_api_cost", prices)
    normalized_source = source.strip("/")
    if not normalized_source:
        raise ValueError("source must be non-empty")
    normalized_provider, normalized_model = _provider_and_model(provider, model_name)

    def record(result: Any) -> None:
        try:
            builder = ACTIVE_COST_SINK.get()
        except LookupError:
            return  # no metrics context: nothing to attribute the cost to
        builder.add_response_cost(
            normalized_source,
            response_getter(result) if response_getter is not None else result,
            provider=normalized_provider,
            model_name=normalized_model,
            **prices,
        )

    def decorate(func: Callable[P, R]) -> Callable[P, R]:
        if iscoroutinefunction(func):
            async_func = cast(Callable[P, Awaitable[Any]], func)

            @wraps(func)
            async def async_wrapper(*args: P.args, **kwargs: P.kwargs) -> Any:
                result = await async_func(*args, **kwargs)
                record(result)
                return result

            return cast(Callable[P, R], async_wrapper)

        @wraps(func)
        def sync_wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
            result = func(*args, **kwargs)
            record(result)
            return result

        return sync_wrapper

    return decorate


__all__ = [
    "MODEL_TOKEN_PRICING",
    "CostExtractor",
    "PricesPerMillion",
    "TokenPricing",
    "extract_api_cost",
    "normalize_model_name",
    "normalize_provider",
    "track_api_cost",
]
