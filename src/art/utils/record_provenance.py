"""`record_provenance`: mark the newest LoRA artifact of a W&B run with how it was made (the reference's).

W&B keeps a list under the artifact's metadata key `wandb.provenance` ("local-rl", "serverless-sft", ...);
each call appends its tag unless it is already the last one. A run with no such artifact yet is left alone.
Needs wandb (`pip install 'agent-reinforcement-trainer[wandb]'`) and W&B's servers (not offline mode).
"""

from __future__ import annotations

from typing import Any

PROVENANCE_KEY = "wandb.provenance"


def record_provenance(run: Any, provenance: str) -> None:
    """Append `provenance` to `wandb.provenance` of the run's latest "lora" artifact (`{entity}/{project}/{name}:latest`).

    Nothing happens when the run has no such artifact yet; the tag is not repeated when it is already the
    last one.

    Example:
        record_provenance(wandb_run, "local-rl")
    """
    if not isinstance(provenance, str) or not provenance.strip():
        raise ValueError(f"provenance must be a non-empty string such as 'local-rl', got {provenance!r}")
    try:
        import wandb
    except ImportError:
        from art.integrations import install_command

        raise ImportError(f"record_provenance needs wandb: {install_command('wandb')}") from None

    path = f"{run.entity}/{run.project}/{run.name}:latest"
    try:
        artifact = wandb.Api().artifact(path, type="lora")
    except wandb.errors.CommError:
        return  # no artifact yet
    existing = artifact.metadata.get(PROVENANCE_KEY)
    tags = list(existing) if existing is not None else []
    if not tags or tags[-1] != provenance:
        tags.append(provenance)
    artifact.metadata[PROVENANCE_KEY] = tags
    artifact.save()
