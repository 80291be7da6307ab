"""`deploy_model`: a trained checkpoint to a hosted inference provider (the reference's
`art.utils.deployment`, same names): Together (a LoRA adapter fetched from a presigned S3 URL) or W&B
(a `lora` artifact the W&B inference service serves as `wandb-artifact:///entity/project/name:stepN`).

The checkpoint must be on disk (`LocalBackend._experimental_pull_model_checkpoint` fetches one).

    result = await deploy_model(model, checkpoint_path, step=5, provider="together",
                                config=TogetherDeploymentConfig(s3_bucket="my-bucket"))
    print(result.inference_model_name)
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from art.utils.deployment.config import DeploymentConfig, DeploymentResult, Provider
from art.utils.deployment.together import TogetherDeploymentConfig, deploy_to_together
from art.utils.deployment.wandb import WandbDeploymentConfig, deploy_wandb

if TYPE_CHECKING:
    from art.model import TrainableModel

__all__ = ["DeploymentConfig", "DeploymentResult", "Provider", "deploy_model"]


async def deploy_model(
    model: TrainableModel,
    checkpoint_path: str,
    step: int,
    provider: Provider,
    config: DeploymentConfig | None = None,
    verbose: bool = False,
) -> DeploymentResult:
    """Deploy checkpoint `step` of `model` (the folder `checkpoint_path`) to `provider`.

    "together" needs a `TogetherDeploymentConfig` (its S3 bucket, for the presigned URL Together fetches);
    "wandb" takes an optional `WandbDeploymentConfig`. A missing folder is a FileNotFoundError; a config of
    the wrong provider a TypeError.

    Example:
        result = await deploy_model(model, ".art/p/models/m/checkpoints/0005", 5, "wandb")
    """
    if not os.path.exists(checkpoint_path):
        raise FileNotFoundError(f"Checkpoint not found at {checkpoint_path}")
    if provider == "wandb":
        if config is not None and not isinstance(config, WandbDeploymentConfig):
            raise TypeError(
                f"Expected WandbDeploymentConfig for provider 'wandb', got {type(config).__name__}"
            )
        name = deploy_wandb(
            model=model, checkpoint_path=checkpoint_path, step=step, config=config, verbose=verbose
        )
        return DeploymentResult(inference_model_name=name)
    if provider == "together":
        if config is None:
            raise ValueError(
                "Config is required for provider 'together': pass TogetherDeploymentConfig(s3_bucket=...)"
            )
        if not isinstance(config, TogetherDeploymentConfig):
            raise TypeError(
                f"Expected TogetherDeploymentConfig for provider 'together', got {type(config).__name__}"
            )
        name = await deploy_to_together(
            model=model, checkpoint_path=checkpoint_path, step=step, config=config, verbose=verbose
        )
        return DeploymentResult(inference_model_name=name)
    raise ValueError(f"Unsupported provider: {provider!r}. Use 'together' or 'wandb'.")
