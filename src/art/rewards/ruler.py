"""RULER (Relative Universal LLM-Elicited Rewards): an LLM judge scores a group of trajectories 0-1.

Relative scoring is easier than absolute scoring, and GRPO only needs scores that rank the trajectories of
one group well, so RULER shows a judge all of a group's trajectories at once, against a plain-English
rubric, and takes its scores as rewards.

What the judge sees: the messages every trajectory shares (system prompt, task) once, as context; the
tools, once; then each trajectory's remainder under an id. When all trajectories are identical, one is
judged and its score copied. The answer must be `{"scores": [{"trajectory_id", "explanation", "score"}]}`
with one entry per id and scores in [0, 1]; anything else is re-asked (bounded), then a clear error.

What makes the scores trustworthy, beyond the reference design:
- cache: every judgement is stored on disk (see `cache.py`), so re-running a scoring costs nothing;
- position bias: trajectories are shown in a seeded shuffled order and the scores mapped back; with
  `num_orders=K` the group is judged under K rotations of that order (each trajectory visits K positions)
  and the scores averaged, with the spread reported;
- ensembles: give several judges; the reward is their mean or median, and their agreement (Kendall tau
  between their rankings) is reported;
- calibration: `ruler_score_group` reports the rank correlation between the trajectories' independent
  reward (a hand-written check) and the judge's score, when the former varies.
"""

from __future__ import annotations

import asyncio
import json
import logging
import random
import statistics
import warnings
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from textwrap import dedent
from typing import Any, Literal

from pydantic import BaseModel, Field

from art.common.offline_litellm import import_litellm
from art.metrics.api_costs import extract_api_cost
from art.metrics.builder import MetricsBuilder
from art.record.step_record import JUDGE_EXPLANATION_PREFIX
from art.rewards.agreement import kendall_tau, pairwise_kendall, spearman
from art.rewards.cache import CacheSetting, JudgeCache, cache_key, resolve_cache
from art.rewards.fit import budget_after_overflow, cut_contents, prompt_chars
from art.rewards.judge import (
    InvalidAnswer,
    Judge,
    JudgeContextError,
    JudgeError,
    JudgeLike,
    ask_judge,
    resolve_judges,
)
from art.rewards.prompt import (
    PROMPT_VERSION,
    TrajectoryScore,
    answer_schema,
    build_prompt,
    common_prefix_length,
    jsonable,
    parse_scores,
)
from art.rewards.prompt import (
    Response as Response,  # the reference's name for the judge's answer format
)
from art.trajectories import Tools, Trajectory, TrajectoryGroup

logger = logging.getLogger("art.rewards")

DEFAULT_JUDGE = "openai/o4-mini"
JUDGE_COST_SOURCE = "judge/ruler"  # the reference's cost key: costs/{context}/judge/ruler


async def acompletion(**kwargs: Any) -> Any:
    """`litellm.acompletion`: how RULER reaches a LiteLLM judge (the reference's module attribute, which
    code may replace, e.g. to record or fake the judge's calls)."""
    return await import_litellm().acompletion(**kwargs)


def __getattr__(name: str) -> Any:
    if name == "ModelResponse":  # the reference's module attribute: LiteLLM's response type
        return import_litellm().ModelResponse
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def record_judge_cost(judge: Judge, response: Any) -> None:
    """Add what one judge response cost to the active metrics context as `costs/{context}/judge/ruler`
    (the reference's key): the cost the response states (OpenRouter's `usage.cost`), else its tokens at the
    model's prices (ours, then LiteLLM's map). Unknown prices or no active context: nothing is added."""
    try:
        builder = MetricsBuilder.get_active()
    except LookupError:
        return
    provider = "anthropic" if judge.model.startswith("anthropic/") else "openai"  # LiteLLM: OpenAI usage
    try:
        cost = extract_api_cost(
            response,
            provider=provider,
            model_name=judge.model,
            cost_extractors=builder._shared.extractors,
            model_pricing=builder._shared.pricing,
        )
    except ValueError as e:  # a model without known prices (a local judge): no cost, said at debug level
        logger.debug("no cost recorded for judge %s: %s", judge.label, e)
        return
    if cost:  # a free local model has price 0: no cost key
        builder.add_cost(f"{builder.cost_context.strip('/')}/{JUDGE_COST_SOURCE}", cost)


Aggregate = Literal["mean", "median"]

DEFAULT_RUBRIC = dedent(
    """\
    - Reaching the goal comes first: a trajectory that achieves what was asked must score clearly higher
      than any trajectory that does not.
    - Among trajectories that reach the goal, the more efficient one scores higher: fewer wasted steps,
      detours, repeated or useless tool calls, and no needless length.
    - Let score differences mirror quality differences: nearly equal work gets nearly equal scores, much
      better work gets a much higher score.
    - Give partial credit for real progress toward the goal, even when the goal is not reached.
    """
)
"""The default rubric. It is generic on purpose: the judge learns the task from the trajectories' own
system and user messages."""


class Judgement(BaseModel):
    """One judge's answer for one order of the trajectories, mapped back to the original order.

    Example:
        result = await ruler_detailed([messages_a, messages_b], "openai/o4-mini", num_orders=2)
        for judgement in result.judgements:
            print(judgement.judge, judgement.order, [s.score for s in judgement.scores])
    """

    judge: str = Field(description="The judge's label.")
    judge_index: int
    order: list[int] = Field(description="Original indices (0-based) in the order they were shown.")
    scores: list[TrajectoryScore] = Field(description="One per trajectory, in original order, ids 1..n.")
    cached: bool = Field(description="True when the answer came from the cache (no request made).")


class RulerResult(BaseModel):
    """Everything one RULER scoring produced: final scores, every judgement, and metrics.

    Example:
        result = await ruler_detailed([messages_a, messages_b], ["openai/o4-mini", judge])
        print([s.score for s in result.scores], result.metrics)
    """

    scores: list[TrajectoryScore] = Field(description="Final scores in original order (ids '1'..'n').")
    judgements: list[Judgement]
    metrics: dict[str, float] = Field(description="Group-level metrics (spread, agreement, cache hits).")
    trajectory_metrics: list[dict[str, float]] = Field(description="Per-trajectory metrics, original order.")


# ---- orders -------------------------------------------------------------------------------------------------
def presentation_orders(n: int, num_orders: int, *, shuffle: bool, seed: int | str) -> list[list[int]]:
    """The orders to show n trajectories in: K evenly spaced rotations of one seeded shuffle.

    Rotations place every trajectory at K different positions (with K = n, at every position once), which
    averages position bias out better than K independent shuffles. K is capped at n.
    """
    base = list(range(n))
    if shuffle:
        random.Random(f"ruler-order:{seed}").shuffle(base)
    k = min(num_orders, n)
    shifts = sorted({(i * n) // k for i in range(k)})
    return [base[s:] + base[:s] for s in shifts]


# ---- scoring ------------------------------------------------------------------------------------------------
def _check_options(num_orders: int, aggregate: str, rubric: str) -> None:
    if not isinstance(num_orders, int) or num_orders < 1:
        raise ValueError(f"num_orders must be an integer >= 1, got {num_orders!r}")
    if aggregate not in ("mean", "median"):
        raise ValueError(f"aggregate must be 'mean' or 'median', got {aggregate!r}")
    if not isinstance(rubric, str) or not rubric.strip():
        raise ValueError(
            "rubric must be a non-empty string (or leave the default, art.rewards.DEFAULT_RUBRIC)"
        )


def _check_count(n: int, *, one: Literal["refuse", "warn"] = "refuse") -> None:
    """Refuse no trajectories; refuse one (a training group: nothing to compare), or with `one="warn"`
    (`ruler` itself, as the reference scores any number) say that its score is not a comparison."""
    if n == 1 and one == "warn":
        warnings.warn(
            "RULER got only 1 trajectory: its score is the judge's judgement of it alone, not a comparison "
            "(give RULER at least 2 rollouts of the same scenario to rank)",
            stacklevel=4,
        )
        return
    if n == 0:
        raise ValueError(
            "RULER got no trajectories to score. If this is a group whose rollouts all failed, drop it "
            "(ruler_score_group(..., swallow_exceptions=True) as gather_trajectory_groups' after_each does)"
        )
    if n == 1:
        raise ValueError(
            "RULER compares trajectories with each other, and got only 1: there is nothing to compare. "
            "Give each group at least 2 rollouts of the same scenario, e.g. "
            "art.TrajectoryGroup(rollout(scenario) for _ in range(4))"
        )


MAX_REFITS = 3
"""How many times one judgement is cut shorter and asked again after the judge refused it as too long."""

_fitted_prompt_chars: dict[str, int] = {}
"""Per judge (its cache identity): the character budget a refused prompt was last cut to and then accepted.
Later judgements in this process start from it, so a small judge's context costs one refusal, not one per
group. A budget set with `Judge(max_prompt_chars=...)` still applies when it is smaller."""


def _judge_key(judge: Judge) -> str:
    return json.dumps(judge.cache_identity(), sort_keys=True, default=str)


def _start_budget(judge: Judge) -> int | None:
    """The budget a judgement starts from: the judge's own and the one learned from its refusals, the
    smaller; None when neither exists (the prompt goes whole)."""
    budgets = [b for b in (judge.max_prompt_chars, _fitted_prompt_chars.get(_judge_key(judge))) if b]
    return min(budgets) if budgets else None


PromptMaker = Callable[[int | None], tuple[list[dict[str, Any]], int]]
"""Builds a judgement's prompt within a character budget (None: whole): (prompt, characters cut)."""


def prompt_maker(
    rubric: str,
    context: list[dict[str, Any]],
    shown: Sequence[list[dict[str, Any]]],
    tools: Sequence[Tools | None],
) -> PromptMaker:
    """The prompt of one judgement, cut to a budget when one is given (longest texts first, `fit.py`)."""

    def make(budget: int | None) -> tuple[list[dict[str, Any]], int]:
        prompt = build_prompt(rubric, context, shown, tools)
        if budget is None:
            return prompt, 0
        lists, removed = [context, *shown], 0
        for _ in range(3):  # JSON escapes make the prompt a little longer than its texts: measure again
            excess = prompt_chars(prompt) - budget
            if excess <= 0:
                break
            lists, cut = cut_contents(lists, excess)
            removed += cut
            if not cut:
                break
            prompt = build_prompt(rubric, lists[0], lists[1:], tools)
        return prompt, removed

    return make


async def _judge_once(
    judge: Judge,
    make_prompt: PromptMaker,
    n_shown: int,
    cache: JudgeCache | None,
    debug: bool,
) -> tuple[list[TrajectoryScore], bool]:
    """One judgement, cut to `judge.max_prompt_chars` when set; a prompt the judge refuses as longer
    than its context is cut to fit (as the endpoint's numbers suggest) and asked again, up to MAX_REFITS
    times, with a warning; the budget that then fits is remembered for this judge's later judgements.
    Nothing to cut any more: the `JudgeContextError` is raised."""
    budget = _start_budget(judge)
    for refit in range(MAX_REFITS + 1):
        prompt, removed = make_prompt(budget)
        if removed and refit == 0:
            logger.info("RULER: cut %d characters to fit a prompt budget of %s characters", removed, budget)
        try:
            result = await _judge_prompt(judge, prompt, n_shown, cache, debug)
        except JudgeContextError as exc:
            length = prompt_chars(prompt)
            reserve = judge.params.get("max_tokens") or judge.params.get("max_completion_tokens") or 0
            smaller = budget_after_overflow(length, exc.endpoint_message, int(reserve))
            _, could_cut = make_prompt(smaller)
            if refit == MAX_REFITS or could_cut <= removed:
                exc.add_note(
                    f"RULER cut {removed} characters of the group's longest messages and it still does not fit."
                    if removed
                    else "RULER found no message text long enough to cut."
                )
                raise
            logger.warning(
                "RULER: judge %s's context is too small for this group (%d characters); cutting its longest "
                "messages (tool results first) to about %d characters and asking again",
                judge.label,
                length,
                smaller,
            )
            budget = smaller
            continue
        if refit and budget is not None:
            _fitted_prompt_chars[_judge_key(judge)] = budget
        return result
    raise AssertionError("unreachable")


async def _judge_prompt(
    judge: Judge,
    prompt: list[dict[str, Any]],
    n_shown: int,
    cache: JudgeCache | None,
    debug: bool,
) -> tuple[list[TrajectoryScore], bool]:
    """One judgement of one prompt in shown-id space, from the cache when possible; cached as soon as it
    validates."""
    expected = [str(i + 1) for i in range(n_shown)]
    key = cache_key({"v": PROMPT_VERSION, "judge": judge.cache_identity(), "prompt": prompt})
    if cache is not None:
        entry = cache.get(key)
        if entry is not None:
            try:
                return parse_scores(json.dumps({"scores": entry.get("scores")}), expected), True
            except InvalidAnswer:
                logger.warning(
                    "judge cache entry %s does not fit this prompt; asking the judge", cache.path(key)
                )

    def show(number: int, text: str | None) -> None:
        if debug:
            print(f"[RULER] judge {judge.label}, request {number}, raw answer:\n{text}")

    scores = await ask_judge(
        judge,
        prompt,
        lambda answer: parse_scores(answer, expected),
        schema=answer_schema(expected, judge.max_explanation_chars),
        on_answer=show,
        acompletion=lambda **kwargs: acompletion(**kwargs),  # this module's, looked up at call time
        on_response=lambda response: record_judge_cost(judge, response),
    )
    if cache is not None:
        cache.put(
            key,
            {
                "scores": [s.model_dump() for s in scores],
                "judge": judge.label,
                "created_at": datetime.now(UTC).isoformat(),
            },
        )
    return scores, False


def _explain(judgements: list[Judgement], index: int, many: bool) -> str:
    if not many:
        return judgements[0].scores[index].explanation
    return " | ".join(
        f"[{j.judge}, position {j.order.index(index) + 1}/{len(j.order)}] {j.scores[index].explanation}"
        for j in judgements
    )


async def ruler_detailed(
    message_lists: Sequence[Sequence[Any]],
    judge_model: JudgeLike | Sequence[JudgeLike] = DEFAULT_JUDGE,
    extra_litellm_params: dict[str, Any] | None = None,
    rubric: str = DEFAULT_RUBRIC,
    tools: Tools | Sequence[Tools | None] | None = None,
    *,
    num_orders: int = 1,
    shuffle: bool = True,
    seed: int | str = 0,
    aggregate: Aggregate = "mean",
    cache: CacheSetting = True,
    debug: bool = False,
) -> RulerResult:
    """Score trajectories with one or more judges and return every judgement and metric.

    `message_lists`: one list of chat messages per trajectory (dicts, or pydantic message objects).
    `judge_model`: a LiteLLM string, an `art.rewards.Judge`, or a list of them (an ensemble).
    `tools`: the tools the agent had (shown once), or one tools list per trajectory.
    `num_orders`: judge under this many orders (rotations of a seeded shuffle, at most n) and average.
    `shuffle`: show trajectories in a seeded shuffled order (seed mixed with the content, so different
    groups get different orders while a re-run gets the same ones and hits the cache).
    `aggregate`: how an ensemble's judges are combined. `cache`: True (default folder), a folder, a
    `JudgeCache`, or False. Raises ValueError for bad input and a `JudgeError` when judging fails.

    Example:
        result = await ruler_detailed([messages_a, messages_b], "openai/o4-mini", num_orders=2)
        print([s.score for s in result.scores], result.metrics)
    """
    n = len(message_lists)
    _check_count(n, one="warn")
    _check_options(num_orders, aggregate, rubric)
    judges = resolve_judges(judge_model, extra_litellm_params)
    lists: list[list[dict[str, Any]]] = [jsonable(list(m)) for m in message_lists]
    if tools is None:
        tools_each: list[Tools | None] = [None] * n
    elif isinstance(tools, list) and (not tools or isinstance(tools[0], dict)):
        tools_each = [jsonable(tools)] * n
    else:
        tools_each = [jsonable(t) if t else None for t in tools]
        if len(tools_each) != n:
            raise ValueError(f"tools: got {len(tools_each)} tool lists for {n} trajectories")
    store = resolve_cache(cache)

    prefix = common_prefix_length(lists)
    identical = all(len(m) == prefix for m in lists) and all(t == tools_each[0] for t in tools_each)
    if identical:
        logger.warning(
            "RULER: all %d trajectories are identical; judging one on its own and copying its score", n
        )
        # Shown whole (no context split), as the one trajectory of the prompt.
        orders: list[list[int]] = [[0]]
        context: list[dict[str, Any]] = []
        cut = 0
    else:
        digest = cache_key({"lists": lists, "tools": tools_each})[:16]
        orders = presentation_orders(n, num_orders, shuffle=shuffle, seed=f"{seed}:{digest}")
        context, cut = lists[0][:prefix], prefix

    plan = [(j, judge, order) for j, judge in enumerate(judges) for order in orders]
    outcomes = await asyncio.gather(
        *(
            _judge_once(
                judge,
                prompt_maker(
                    rubric, context, [lists[i][cut:] for i in order], [tools_each[i] for i in order]
                ),
                len(order),
                store,
                debug,
            )
            for _, judge, order in plan
        ),
        return_exceptions=True,
    )
    failures = [o for o in outcomes if isinstance(o, BaseException)]
    if failures:
        first = failures[0]
        if len(plan) > 1 and isinstance(first, JudgeError):
            kept = " (those that succeeded are cached)" if store is not None else ""
            first.add_note(f"{len(failures)} of {len(plan)} judgements failed{kept}.")
        raise first

    judgements: list[Judgement] = []
    for (j, judge, order), outcome in zip(plan, outcomes, strict=True):
        assert not isinstance(outcome, BaseException)
        shown_scores, cached = outcome
        if identical:
            only = shown_scores[0]
            mapped = [only.model_copy(update={"trajectory_id": str(i + 1)}) for i in range(n)]
            full_order = list(range(n))
        else:
            by_original = {original: shown_scores[pos] for pos, original in enumerate(order)}
            mapped = [by_original[i].model_copy(update={"trajectory_id": str(i + 1)}) for i in range(n)]
            full_order = order
        judgements.append(
            Judgement(judge=judge.label, judge_index=j, order=full_order, scores=mapped, cached=cached)
        )

    final, metrics, trajectory_metrics = _combine(judgements, n, len(judges), len(orders) > 1, aggregate)

    many = len(judgements) > 1
    scores = [
        TrajectoryScore(trajectory_id=str(i + 1), explanation=_explain(judgements, i, many), score=final[i])
        for i in range(n)
    ]
    if debug:
        for s in scores:
            print(f"[RULER] trajectory {s.trajectory_id}: {s.score:.3f}  {s.explanation}")
    return RulerResult(
        scores=scores, judgements=judgements, metrics=metrics, trajectory_metrics=trajectory_metrics
    )


def _combine(
    judgements: list[Judgement], n: int, num_judges: int, many_orders: bool, aggregate: Aggregate
) -> tuple[list[float], dict[str, float], list[dict[str, float]]]:
    """The final scores of `n` trajectories from every judgement (per judge: the mean over orders; across
    judges: `aggregate`), the group's metrics and each trajectory's (order spread, per-judge scores)."""
    # Per judge: mean over orders (and spread); then across judges: mean or median.
    per_judge: list[list[float]] = []
    spreads: list[list[float]] = []
    for j in range(num_judges):
        mine = [jm for jm in judgements if jm.judge_index == j]
        per_judge.append([statistics.fmean(jm.scores[i].score for jm in mine) for i in range(n)])
        spreads.append(
            [
                max(jm.scores[i].score for jm in mine) - min(jm.scores[i].score for jm in mine)
                for i in range(n)
            ]
        )
    combine = statistics.fmean if aggregate == "mean" else statistics.median
    final = [float(combine([per_judge[j][i] for j in range(num_judges)])) for i in range(n)]

    metrics: dict[str, float] = {
        "ruler_judgements": float(len(judgements)),
        "ruler_cache_hits": float(sum(jm.cached for jm in judgements)),
    }
    trajectory_metrics: list[dict[str, float]] = [{} for _ in range(n)]
    if many_orders:
        spread_each = [statistics.fmean(spreads[j][i] for j in range(num_judges)) for i in range(n)]
        metrics["ruler_order_spread"] = statistics.fmean(spread_each)
        metrics["ruler_order_spread_max"] = max(spread_each)
        for i in range(n):
            trajectory_metrics[i]["ruler_order_spread"] = spread_each[i]
    if num_judges > 1:
        for i in range(n):
            for j in range(num_judges):
                trajectory_metrics[i][f"ruler_score_j{j}"] = per_judge[j][i]
        taus = pairwise_kendall(per_judge)
        if taus:
            metrics["ruler_judge_agreement"] = statistics.fmean(taus)
            metrics["ruler_judge_agreement_min"] = min(taus)

    return final, metrics, trajectory_metrics


async def ruler(
    message_lists: Sequence[Sequence[Any]],
    judge_model: JudgeLike | Sequence[JudgeLike] = DEFAULT_JUDGE,
    extra_litellm_params: dict[str, Any] | None = None,
    rubric: str = DEFAULT_RUBRIC,
    tools: Tools | Sequence[Tools | None] | None = None,
    *,
    debug: bool = False,
    num_orders: int = 1,
    shuffle: bool = True,
    seed: int | str = 0,
    aggregate: Aggregate = "mean",
    cache: CacheSetting = True,
) -> list[TrajectoryScore]:
    """Score trajectories (lists of chat messages) relative to each other; one score per list, in order.

    Scores are in [0, 1], ids '1'..'n' follow the input order. See `ruler_detailed` for the options and
    for the judgements and metrics behind the scores; `ruler_score_group` for use in a training loop.

    Example:
        scores = await ruler([messages_a, messages_b], "openai/o4-mini")
        scores = await ruler(lists, art.rewards.Judge(model="my-judge", base_url="http://127.0.0.1:8000/v1"))
    """
    result = await ruler_detailed(
        message_lists,
        judge_model,
        extra_litellm_params,
        rubric,
        tools,
        num_orders=num_orders,
        shuffle=shuffle,
        seed=seed,
        aggregate=aggregate,
        cache=cache,
        debug=debug,
    )
    return result.scores


def _independent_reward(trajectory: Trajectory) -> float:
    # A group scored by RULER before keeps its hand-written reward in metrics["independent_reward"]:
    # re-scoring must not mistake the old judge's score for it.
    if "ruler_score" in trajectory.metrics and "independent_reward" in trajectory.metrics:
        return float(trajectory.metrics["independent_reward"])
    return trajectory.reward


def _check_group(group: TrajectoryGroup) -> None:
    """Refuse a group RULER cannot score: no trajectories, too few, or additional histories."""
    trajectories = group.trajectories
    if not trajectories:
        note = (
            f" ({len(group.exceptions)} rollouts failed; the first: {group.exceptions[0].message})"
            if group.exceptions
            else ""
        )
        raise ValueError(
            f"the group has no trajectories to score{note}. Drop it (swallow_exceptions=True makes "
            "ruler_score_group return None, and gather_trajectory_groups' after_each then drops it)"
        )
    _check_count(len(trajectories))
    for i, t in enumerate(trajectories):
        if t.additional_histories:
            raise ValueError(
                f"trajectory {i + 1} has additional_histories, which RULER does not judge yet; score the "
                "group without them (copy the trajectories with additional_histories=[])"
            )


def _scored_group(group: TrajectoryGroup, result: RulerResult) -> TrajectoryGroup:
    """A new group: `group` with `result`'s scores as rewards, the old rewards kept, explanations logged."""
    trajectories = group.trajectories
    independent = [_independent_reward(t) for t in trajectories]
    previous = [t.metrics.get("ruler_score") for t in trajectories]
    final = [s.score for s in result.scores]

    new_trajectories: list[Trajectory] = []
    for t, ind, score, extra in zip(
        trajectories, independent, result.scores, result.trajectory_metrics, strict=True
    ):
        new = t.model_copy(deep=True)
        # Metrics of an earlier scoring (spread, per-judge scores) would be stale next to the new ones.
        new.metrics = {k: v for k, v in new.metrics.items() if not k.startswith("ruler_")}
        new.metrics["independent_reward"] = ind
        new.metrics["ruler_score"] = score.score
        new.metrics.update(extra)
        new.reward = score.score
        index = int(score.trajectory_id) - 1
        if len(result.judgements) == 1:
            new.log(f"{JUDGE_EXPLANATION_PREFIX}: {result.judgements[0].scores[index].explanation}")
        else:
            for jm in result.judgements:
                position = jm.order.index(index) + 1
                new.log(
                    f"{JUDGE_EXPLANATION_PREFIX} ({jm.judge}, shown at position {position} of {len(jm.order)}, "
                    f"score {jm.scores[index].score:.3f}): {jm.scores[index].explanation}"
                )
        new_trajectories.append(new)

    metrics: dict[str, float | int | bool] = {
        **{k: v for k, v in group.metrics.items() if not k.startswith("ruler_")},
        **result.metrics,
    }
    if len(set(independent)) > 1:
        rho, tau = spearman(independent, final), kendall_tau(independent, final)
        if rho is not None and tau is not None:
            metrics["ruler_calibration_spearman"] = rho
            metrics["ruler_calibration_kendall"] = tau
    if all(isinstance(p, int | float) for p in previous):
        tau = kendall_tau([float(p) for p in previous if p is not None], final)
        if tau is not None:
            metrics["ruler_previous_agreement"] = tau
    judges = ", ".join(dict.fromkeys(jm.judge for jm in result.judgements))
    summary = (
        f"RULER: {len(trajectories)} trajectories judged by {judges} "
        f"({int(result.metrics['ruler_judgements'])} judgements, {int(result.metrics['ruler_cache_hits'])} from cache)"
    )
    return TrajectoryGroup(
        new_trajectories,
        exceptions=[e.model_copy() for e in group.exceptions],
        metadata=dict(group.metadata),
        metrics=metrics,
        logs=[*group.logs, summary],
    )


async def ruler_score_group(
    group: TrajectoryGroup,
    judge_model: JudgeLike | Sequence[JudgeLike] = DEFAULT_JUDGE,
    extra_litellm_params: dict[str, Any] | None = None,
    rubric: str = DEFAULT_RUBRIC,
    *,
    swallow_exceptions: bool = False,
    debug: bool = False,
    num_orders: int = 1,
    shuffle: bool = True,
    seed: int | str = 0,
    aggregate: Aggregate = "mean",
    cache: CacheSetting = True,
) -> TrajectoryGroup | None:
    """Score a group with RULER and return a NEW group whose rewards are the judge's scores.

    Each trajectory keeps its previous reward in `metrics["independent_reward"]`, gets the score in
    `metrics["ruler_score"]` and the judge's explanation in `logs`. The group's metrics gain
    `ruler_calibration_spearman`/`_kendall` (independent reward vs score, when the former varies),
    `ruler_order_spread` (with `num_orders` > 1), `ruler_judge_agreement` (with several judges),
    `ruler_previous_agreement` (when re-scoring a group a judge scored before) and cache counts.
    The input group is not modified.

    With `swallow_exceptions=True` any failure (judge down, unusable answers, a group of one ...) is
    logged and None returned, so that `gather_trajectory_groups(..., after_each=lambda g:
    ruler_score_group(g, judge, swallow_exceptions=True))` drops the group instead of stopping.
    Other options as in `ruler_detailed`.

    Example:
        judged = await art.rewards.ruler_score_group(group, "openai/o4-mini")
        groups = await art.gather_trajectory_groups(
            pending, after_each=lambda g: art.rewards.ruler_score_group(g, "openai/o4-mini", swallow_exceptions=True)
        )
    """
    try:
        _check_group(group)
        result = await ruler_detailed(
            [t.messages() for t in group.trajectories],
            judge_model,
            extra_litellm_params,
            rubric,
            [t.tools for t in group.trajectories],
            num_orders=num_orders,
            shuffle=shuffle,
            seed=seed,
            aggregate=aggregate,
            cache=cache,
            debug=debug,
        )
        return _scored_group(group, result)
    except Exception as exc:
        if not swallow_exceptions:
            raise
        logger.warning(
            "RULER: dropping a group of %d trajectories: %s: %s",
            len(group.trajectories),
            type(exc).__name__,
            exc,
        )
        if debug:
            print(f"[RULER] swallowed {type(exc).__name__}: {exc}")
        return None
