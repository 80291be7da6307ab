"""`get_model_step(model, art_path)` and `get_step_from_dir(model_dir)`: a trainable model's newest checkpoint
on disk, without a backend (the reference's helpers; 0 before any checkpoint). With a registered backend
prefer `await model.get_step()`."""

from __future__ import annotations

from typing import TYPE_CHECKING

from art.record.storage import ModelStorage, usable_checkpoint_steps

if TYPE_CHECKING:
    from art.model import Model


def get_model_step(model: Model, art_path: str | None = None) -> int:
    """The newest complete checkpoint step of `model` under `art_path` (default: the model's base_path).

    Example:
        step = get_model_step(model)  # 0 before the first checkpoint
    """
    storage = ModelStorage(art_path or model.base_path, model.project, model.name)
    return storage.latest_checkpoint_step() or 0


def get_step_from_dir(output_dir: str) -> int:
    """The newest checkpoint step in a model's folder (`{art_path}/{project}/models/{name}`), 0 if none.

    A step counts when its folder is a complete checkpoint: ART's (with its manifest) or a whole PEFT
    adapter (as the reference saves them); an interrupted save does not (the reference counts any folder
    named by a number). Nothing is created (the reference makes `output_dir` if it is missing).

    Example:
        step = get_step_from_dir(".art/demo/models/agent-001")
    """
    steps = usable_checkpoint_steps(output_dir)
    return steps[-1] if steps else 0
