"""Rewards: one type (`Reward`) for a hand-written function, RULER, a shaping signal and their sums; and
RULER itself, an LLM judge you can trust.

    from art.rewards import RulerReward, reward_fn, ruler_score_group, Judge
    group = await ruler_score_group(group, "openai/o4-mini")                  # LiteLLM (the `judge` extra)
    group = await ruler_score_group(group, Judge(model="m", base_url="http://127.0.0.1:8000/v1"))  # any endpoint
    reward = RulerReward("openai/o4-mini") + 0.2 * reward_fn(lambda t: float(t.metrics.get("solved", 0)))
    group = await reward.score_group(group)

Client side only: nothing here imports torch.
"""

from art.record.storage import read_groups_file
from art.rewards.agreement import kendall_tau, spearman
from art.rewards.cache import JudgeCache, default_cache_dir
from art.rewards.judge import (
    InvalidAnswer,
    Judge,
    JudgeAnswerError,
    JudgeConfigError,
    JudgeContextError,
    JudgeError,
    JudgeLike,
    JudgeRequestError,
    JudgeUnavailableError,
    RetryPolicy,
)
from art.rewards.prompt import TrajectoryScore
from art.rewards.rescore import RescoreResult, SkippedGroup, rescore
from art.rewards.reward import (
    FunctionReward,
    RecordedReward,
    Reward,
    RewardSum,
    RulerReward,
    TrajectoryScoreFn,
    WeightedReward,
    as_reward,
    reward_fn,
)
from art.rewards.ruler import (
    DEFAULT_JUDGE,
    DEFAULT_RUBRIC,
    Judgement,
    RulerResult,
    ruler,
    ruler_detailed,
    ruler_score_group,
)

__all__ = [
    "DEFAULT_JUDGE",
    "DEFAULT_RUBRIC",
    "FunctionReward",
    "InvalidAnswer",
    "Judge",
    "JudgeAnswerError",
    "JudgeCache",
    "JudgeConfigError",
    "JudgeContextError",
    "JudgeError",
    "JudgeLike",
    "JudgeRequestError",
    "JudgeUnavailableError",
    "Judgement",
    "RecordedReward",
    "RescoreResult",
    "RetryPolicy",
    "Reward",
    "RewardSum",
    "RulerResult",
    "RulerReward",
    "SkippedGroup",
    "TrajectoryScore",
    "TrajectoryScoreFn",
    "WeightedReward",
    "as_reward",
    "default_cache_dir",
    "kendall_tau",
    "read_groups_file",
    "rescore",
    "reward_fn",
    "ruler",
    "ruler_detailed",
    "ruler_score_group",
    "spearman",
]
