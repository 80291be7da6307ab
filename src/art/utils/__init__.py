"""Small helpers with no better home: retrying calls, iterating a dataset in training steps, and
supervised fine-tuning helpers (`art.utils.sft`: JSONL files, chunks, learning-rate schedules)."""

from .iterate_dataset import DatasetBatch, iterate_dataset
from .retry import retry

__all__ = ["DatasetBatch", "iterate_dataset", "retry"]
