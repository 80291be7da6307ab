"""`get_model_step(model, art_path)`: a trainable model's newest checkpoint on disk, without a backend (the
reference's helper; 0 before any checkpoint). With a registered backend prefer `await model.get_step()`."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..storage import ModelStorage

if TYPE_CHECKING:
    from ..model import Model


def get_model_step(model: Model, art_path: str | None = None) -> int:
    """The newest complete checkpoint step of `model` under `art_path` (default: the model's base_path).

    Example:
        step = get_model_step(model)  # 0 before the first checkpoint
    """
    storage = ModelStorage(art_path or model.base_path, model.project, model.name)
    return storage.latest_checkpoint_step() or 0
