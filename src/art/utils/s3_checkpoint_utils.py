"""Where the reference keeps `get_latest_checkpoint_step_from_s3`; it lives in `art.utils.s3` here."""

from .s3 import get_latest_checkpoint_step_from_s3

__all__ = ["get_latest_checkpoint_step_from_s3"]
