"""Where a model's record lives on disk, under the reference's names (`art.utils.output_dirs`).

The layout is the same as the reference's: `{art_path}/{project}/models/{name}/` holds `history.jsonl`,
`trajectories/{split}/{step:04d}.jsonl` (the reference: `.parquet`) and `checkpoints/{step:04d}/`.
`art_path` defaults to `get_default_art_path()`: `./.art`, where `Model(base_path=".art")` and
`LocalBackend(path=None)` keep records here (the reference's default is `.art` at its repository root).
"""

from __future__ import annotations

import os

from art.model import Model


def get_default_art_path() -> str:
    """The folder records are kept in by default: ".art" under the working directory.

    Example:
        >>> get_default_art_path()
        './.art'
    """
    return os.path.join(".", ".art")


def get_models_dir(project_name: str, art_path: str | None = None) -> str:
    """The folder that holds every model of a project.

    Example:
        >>> get_models_dir("tic-tac-toe", art_path="/data/.art")
        '/data/.art/tic-tac-toe/models'
    """
    return f"{art_path or get_default_art_path()}/{project_name}/models"


def get_model_dir(model: Model, art_path: str | None = None) -> str:
    """A model's folder; `art_path` None: the model's own `base_path` (where its record actually is).

    Example:
        >>> get_model_dir(art.Model(name="agent", project="demo", base_path="/data/.art"))
        '/data/.art/demo/models/agent'
    """
    return f"{art_path or model.base_path}/{model.project}/models/{model.name}"


def get_output_dir_from_model_properties(project: str, name: str, art_path: str | None = None) -> str:
    """A model's folder from its project and name.

    Example:
        >>> get_output_dir_from_model_properties("demo", "agent", "/data/.art")
        '/data/.art/demo/models/agent'
    """
    return f"{art_path or get_default_art_path()}/{project}/models/{name}"


def get_step_checkpoint_dir(model_output_dir: str, step: int) -> str:
    """The folder of a step's checkpoint (a PEFT LoRA adapter) inside a model's folder.

    Example:
        >>> get_step_checkpoint_dir("/data/.art/demo/models/agent", 12)
        '/data/.art/demo/models/agent/checkpoints/0012'
    """
    return f"{model_output_dir}/checkpoints/{step:04d}"


def get_trajectories_dir(model_output_dir: str) -> str:
    """The folder of every split's trajectories inside a model's folder.

    Example:
        >>> get_trajectories_dir("/data/.art/demo/models/agent")
        '/data/.art/demo/models/agent/trajectories'
    """
    return f"{model_output_dir}/trajectories"


def get_trajectories_split_dir(model_output_dir: str, split: str) -> str:
    """The folder of one split's trajectories inside a model's folder.

    Example:
        >>> get_trajectories_split_dir("/data/.art/demo/models/agent", "val")
        '/data/.art/demo/models/agent/trajectories/val'
    """
    return f"{model_output_dir}/trajectories/{split}"
