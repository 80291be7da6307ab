"""Small helpers with no better home: retrying calls, iterating a dataset in training steps, limiting
concurrency. Also here, as in the reference, but imported by their module path: `art.utils.strip_logprobs`
(`from art.utils.strip_logprobs import strip_logprobs`) and `art.utils.litellm` (needs litellm)."""

from .iterate_dataset import DatasetBatch, iterate_dataset
from .limit_concurrency import limit_concurrency
from .retry import retry

__all__ = ["DatasetBatch", "iterate_dataset", "limit_concurrency", "retry"]
