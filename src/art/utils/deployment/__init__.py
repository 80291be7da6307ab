"""Deploying trained checkpoints to hosted inference providers (the reference's `art.utils.deployment`):
`deploy_model(model, checkpoint_path, step, provider, config)` for Together and W&B. See `.common`."""

from art.utils.deployment.common import DeploymentConfig, DeploymentResult, Provider, deploy_model
from art.utils.deployment.legacy import LoRADeploymentJob, LoRADeploymentProvider
from art.utils.deployment.together import TogetherDeploymentConfig
from art.utils.deployment.wandb import WandbDeploymentConfig, deploy_wandb

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
