"""Deploying a LoRA checkpoint to W&B: logged as a `lora` artifact of the model's project (aliases
`step{N}` and `latest`), which W&B's inference service serves as
`wandb-artifact:///{entity}/{project}/{name}:step{N}`. Needs the `wandb` extra and `WANDB_API_KEY`.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from art.common.errors import UnsupportedBaseModelDeploymentError
from art.utils.deployment.config import DeploymentConfig

if TYPE_CHECKING:
    from art.model import TrainableModel

WANDB_SUPPORTED_BASE_MODELS = [
    "meta-llama/Llama-3.1-8B-Instruct",
    "meta-llama/Llama-3.1-70B-Instruct",
    "OpenPipe/Qwen3-14B-Instruct",
    "Qwen/Qwen2.5-14B-Instruct",
]


class WandbDeploymentConfig(DeploymentConfig):
    """`provenance`: how the model was trained (e.g. ["local-rl"]), stored in the artifact's metadata."""

    provenance: list[str]


def deploy_wandb(
    model: TrainableModel,
    checkpoint_path: str,
    step: int,
    config: WandbDeploymentConfig | None = None,
    verbose: bool = False,
) -> str:
    """Log the checkpoint folder as the model's `lora` artifact; returns its inference name.

    Example:
        name = deploy_wandb(model, ".art/p/models/m/checkpoints/0005", 5)  # wandb-artifact:///...:step5
    """
    if model.base_model not in WANDB_SUPPORTED_BASE_MODELS:
        raise UnsupportedBaseModelDeploymentError(
            message=f"Base model {model.base_model} is not supported for serverless LoRA deployment by W&B. "
            f"Supported models: {WANDB_SUPPORTED_BASE_MODELS}"
        )
    if "WANDB_API_KEY" not in os.environ:
        raise ValueError("WANDB_API_KEY is not set, cannot deploy LoRA to W&B")
    import wandb

    if model.entity is None:
        model.entity = wandb.Api().default_entity
    if verbose:
        print(f"Uploading checkpoint from {checkpoint_path} to W&B...")
    run = wandb.init(name=f"{model.name} (deployment)", entity=model.entity, project=model.project)
    try:
        metadata: dict[str, object] = {"wandb.base_model": model.base_model}
        if config is not None:
            metadata["wandb.provenance"] = list(config.provenance)
        artifact = wandb.Artifact(model.name, type="lora", metadata=metadata)
        artifact.add_dir(checkpoint_path)
        run.log_artifact(artifact, aliases=[f"step{step}", "latest"])
    finally:
        run.finish()
    name = f"wandb-artifact:///{model.entity}/{model.project}/{model.name}:step{step}"
    if verbose:
        print(f"Deployed to W&B: {name}")
    return name
