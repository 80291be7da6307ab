"""The `Backend` protocol: how a model reaches its service (in this process, or over HTTP).

A backend serves trainable models (an OpenAI-compatible endpoint per model), takes training steps on
groups of trajectories, and manages checkpoints. `LocalBackend` (backends/local.py) runs the service in
this process; `RemoteBackend` talks to `art serve`. Both accept the same `train(...)` keyword arguments,
validated here into one `TrainSpec`.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from pydantic import BaseModel, ValidationError

from ..trajectories import TrajectoryGroup
from ..types import TrainResult, TrainSpec

if TYPE_CHECKING:
    from ..model import Model, TrainableModel


class Registration(BaseModel):
    """Where a registered model is served: an OpenAI-compatible base URL, its key, and the latest step."""

    base_url: str
    api_key: str
    step: int = 0


@runtime_checkable
class Backend(Protocol):
    """What `Model` needs from a backend. Implementations must make `register` idempotent."""

    async def register(self, model: Model) -> Registration:
        """Start (or find) the service for `model` and say where it is served."""
        ...

    async def get_step(self, model: TrainableModel) -> int:
        """The newest step (complete checkpoint) of `model`; 0 before any training."""
        ...

    async def train(
        self, model: TrainableModel, trajectory_groups: Iterable[TrajectoryGroup], **kwargs: Any
    ) -> TrainResult:
        """Take one training step; keyword arguments are `TrainSpec` fields (learning_rate, loss_fn...)."""
        ...

    async def delete_checkpoints(self, model: TrainableModel, steps_to_keep: Sequence[int]) -> None:
        """Delete every checkpoint of `model` except `steps_to_keep` (the newest is always kept)."""
        ...

    async def close(self) -> None:
        """Stop services and free resources."""
        ...


def prompted_model_registration(model: Model, backend: str) -> Registration:
    """Where a model that is not trainable is served: its own `inference_base_url` (backends serve only
    trainable models); an error naming the fix when it has none."""
    if model.inference_base_url is None:
        raise ValueError(
            f"model {model.name!r} is not trainable and has no inference_base_url; {backend} serves "
            "TrainableModel only. Pass inference_base_url for a prompted model."
        )
    return Registration(base_url=model.inference_base_url, api_key=model.inference_api_key or "")


def train_spec_from_kwargs(**kwargs: Any) -> TrainSpec:
    """Validate `Backend.train` keyword arguments, with an error that names the bad option and the fix."""
    known = set(TrainSpec.model_fields)
    unknown = sorted(set(kwargs) - known)
    if unknown:
        raise TypeError(
            f"unknown training option(s) {', '.join(map(repr, unknown))}; "
            f"known options: {', '.join(sorted(known))}"
        )
    try:
        return TrainSpec(**kwargs)
    except ValidationError as e:
        problems = "; ".join(f"{'.'.join(map(str, err['loc']))}: {err['msg']}" for err in e.errors())
        raise ValueError(f"invalid training options: {problems}") from None


def describe_group(index: int, group: TrajectoryGroup) -> str:
    """A short name for a group in messages: its index and metadata, if any."""
    meta = f" (metadata {group.metadata})" if group.metadata else ""
    return f"group {index}{meta}"


def prepare_groups_for_training(groups: Iterable[TrajectoryGroup]) -> list[TrajectoryGroup]:
    """Validate every trajectory (field named on error) and warn about groups with nothing to learn from.

    A group in which no trajectory has a trainable turn is named, with what is missing and how to fix it.
    Such groups are kept (the trainer counts and reports them); nothing here drops data.
    """
    group_list = list(groups)
    for gi, group in enumerate(group_list):
        if not isinstance(group, TrajectoryGroup):
            raise TypeError(
                f"trajectory_groups[{gi}] is a {type(group).__name__}, expected art.TrajectoryGroup"
            )
        for ti, trajectory in enumerate(group.trajectories):
            try:
                trajectory.validate_for_record()
            except ValueError as e:
                raise ValueError(f"{describe_group(gi, group)}, trajectory {ti}: {e}") from None
        if group.trajectories and not any(t.num_trainable_turns() for t in group.trajectories):
            warnings.warn(
                f"{describe_group(gi, group)} has no trainable turn: none of its {len(group.trajectories)} "
                "trajectories holds an OpenAI Choice with logprobs. Append `response.choices[0]` (not "
                "`.message`) to `messages_and_choices`, and keep logprobs on (ART's server always returns "
                "them; other servers need `logprobs=True`).",
                stacklevel=3,
            )
    return group_list
