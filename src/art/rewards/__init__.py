"""Rewards without hand-written reward functions: RULER, an LLM judge you can trust.

    from art.rewards import ruler_score_group, Judge
    group = await ruler_score_group(group, "openai/o4-mini")                  # LiteLLM (the `judge` extra)
    group = await ruler_score_group(group, Judge(model="m", base_url="http://127.0.0.1:8000/v1"))  # any endpoint

Client side only: nothing here imports torch.
"""

from art.record.storage import read_groups_file

from .agreement import kendall_tau, spearman
from .cache import JudgeCache, default_cache_dir
from .judge import (
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
from .prompt import TrajectoryScore
from .rescore import RescoreResult, SkippedGroup, rescore
from .ruler import (
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
    "RescoreResult",
    "RetryPolicy",
    "RulerResult",
    "SkippedGroup",
    "TrajectoryScore",
    "default_cache_dir",
    "kendall_tau",
    "read_groups_file",
    "rescore",
    "ruler",
    "ruler_detailed",
    "ruler_score_group",
    "spearman",
]
