"""The reference's older deployment names, kept for code that still imports them."""

from __future__ import annotations

from enum import StrEnum

from pydantic import BaseModel

from art.utils.deployment.together import TogetherJobStatus


class LoRADeploymentProvider(StrEnum):
    TOGETHER = "together"
    WANDB = "wandb"


class LoRADeploymentJob(BaseModel):
    status: TogetherJobStatus
    job_id: str
    model_name: str
    failure_reason: str | None
