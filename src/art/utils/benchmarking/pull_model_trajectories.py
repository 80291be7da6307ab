"""`pull_model_trajectories`: fetch a model's logged trajectories and history from its S3 backup."""

from __future__ import annotations

import os

from art.model import Model
from art.record import s3


async def pull_model_trajectories(model: Model) -> None:
    """Download `model`'s folder from the S3 bucket named by `BACKUP_BUCKET`, without its checkpoints and
    logs, into the model's own `base_path`: its trajectories and history, ready for `load_trajectories`.

    Uses the AWS CLI like `art.utils.s3` (`pip install awscli`); raises OSError (EnvironmentError) when
    `BACKUP_BUCKET` is not set.

    Example:
        os.environ["BACKUP_BUCKET"] = "my-backups"
        await pull_model_trajectories(art.Model(name="agent-001", project="tic-tac-toe"))
        df = await load_trajectories("tic-tac-toe", models=["agent-001"])
    """
    bucket = os.getenv("BACKUP_BUCKET")
    if bucket is None:
        raise OSError("Environment variable BACKUP_BUCKET is required but was not found.")
    print(f"Pulling trajectories for model '{model.name}' from S3 bucket '{bucket}'…", flush=True)
    await s3.pull_model_from_s3(
        model.name,
        model.project,
        s3_bucket=bucket,
        verbose=True,
        art_path=model.base_path,
        exclude=["checkpoints", "logs"],
    )
    print("Finished pulling trajectories.", flush=True)


__all__ = ["pull_model_trajectories"]
