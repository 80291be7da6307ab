"""`TrackedModel`: what the trackers read of a model (its names, its record, its W&B config).

A protocol, so the trackers (below `art.model` in the house) name no class above them; `art.Model` is one.
"""

from __future__ import annotations

from typing import Any, Protocol

from art.record.storage import ModelStorage


class TrackedModel(Protocol):
    """The part of `art.Model` the trackers (W&B, Weave, Langfuse) use."""

    name: str
    project: str
    entity: str | None
    report_metrics: list[str] | None

    @property
    def storage(self) -> ModelStorage:
        """The model's record on disk."""
        ...

    @property
    def wandb_config(self) -> dict[str, Any]:
        """The config the model's W&B run starts with (`Model.update_wandb_config` adds to it)."""
        ...


class ServedModel(TrackedModel, Protocol):
    """A tracked model that is served: what `art.langgraph` needs to point LangChain's client at it."""

    inference_base_url: str | None
    inference_api_key: str | None

    def get_inference_name(self, step: int | None = None) -> str:
        """The model name chat requests send."""
        ...
