"""Deploying trained checkpoints to hosted inference providers (the reference's `art.utils.deployment`):
`deploy_model(model, checkpoint_path, step, provider, config)` for Together and W&B. See `.common`."""

from .common import DeploymentConfig, DeploymentResult, Provider, deploy_model
from .legacy import LoRADeploymentJob, LoRADeploymentProvider
from .together import TogetherDeploymentConfig
from .wandb import WandbDeploymentConfig, deploy_wandb

__all__ = [
    "DeploymentConfig",
    "DeploymentResult",
    "LoRADeploymentJob",
    "LoRADeploymentProvider",
    "Provider",
    "TogetherDeploymentConfig",
    "WandbDeploymentConfig",
    "deploy_model",
    "deploy_wandb",
]
