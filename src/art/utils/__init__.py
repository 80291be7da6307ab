"""Small helpers with no better home: retrying calls, iterating a dataset in training steps, limiting
concurrency, tagging a W&B LoRA artifact with how it was made (`record_provenance`), and supervised fine-tuning helpers (`art.utils.sft`: JSONL files, chunks, learning-rate
schedules). Also here, as in the reference, but imported by their module path: `art.utils.strip_logprobs`
(`from art.utils.strip_logprobs import strip_logprobs`), `art.utils.litellm` (needs litellm) and
`art.utils.s3` (backing a model's folder up to S3 with the AWS CLI)."""

from art.common.limit_concurrency import limit_concurrency
from art.utils.format_message import format_message
from art.utils.get_model_step import get_model_step
from art.utils.iterate_dataset import DatasetBatch, iterate_dataset
from art.utils.log_http_errors import log_http_errors
from art.utils.record_provenance import record_provenance
from art.utils.retry import retry

__all__ = [
    "DatasetBatch",
    "format_message",
    "get_model_step",
    "iterate_dataset",
    "limit_concurrency",
    "log_http_errors",
    "record_provenance",
    "retry",
]
