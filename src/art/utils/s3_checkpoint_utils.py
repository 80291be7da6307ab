"""Where the reference keeps its S3 checkpoint lookups; they live in `art.utils.s3` here."""

from art.record.s3 import get_checkpoint_step_not_after_from_s3, get_latest_checkpoint_step_from_s3

__all__ = ["get_checkpoint_step_not_after_from_s3", "get_latest_checkpoint_step_from_s3"]
