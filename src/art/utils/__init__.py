"""Small helpers with no better home: retrying calls and iterating a dataset in training steps."""

from .iterate_dataset import DatasetBatch, iterate_dataset
from .retry import retry

__all__ = ["DatasetBatch", "iterate_dataset", "retry"]
