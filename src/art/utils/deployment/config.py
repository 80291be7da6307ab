"""The shapes every deployment provider shares: `DeploymentConfig` (the base of each provider's settings),
`DeploymentResult`, `Provider`. Below `together`, `wandb` and `common` (which dispatches to them)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel

Provider = Literal["together", "wandb"]


class DeploymentConfig(BaseModel):
    """Base class of the providers' settings (`TogetherDeploymentConfig`, `WandbDeploymentConfig`)."""


class DeploymentResult(BaseModel):
    """What a deployment gives: the model name to send to the provider's inference API."""

    inference_model_name: str
