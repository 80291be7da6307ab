"""ART, the Agent Reinforcement Trainer: improve an LLM agent from its own experience.

The public face of the package: re-exports only. `import art` stays light (no torch, transformers or
web server); the heavy service loads when a `LocalBackend` registers a model.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from art import dev
from art.auto_trajectory import (
    auto_trajectory,
    capture_auto_trajectory,
    current_trajectory,
    no_capture,
    trajectory,
    trajectory_group,
)
from art.batches import trajectory_group_batches
from art.gather import TooManyExceptions, gather_trajectories, gather_trajectory_groups
from art.model import Backend, Model, TrainableModel
from art.trajectories import (
    History,
    Message,
    MessageOrChoice,
    Messages,
    MessagesAndChoices,
    PydanticException,
    Tools,
    Trajectory,
    TrajectoryGroup,
)
from art.types import (
    LocalTrainResult,
    LoRAConfig,
    MegatronTopologyConfig,
    Registration,
    RuntimeOptions,
    ServerlessTrainResult,
    TrainConfig,
    TrainResult,
    TrainSFTConfig,
    TrainSpec,
)
from art.utils import DatasetBatch, iterate_dataset, retry
from art.yield_trajectory import capture_yielded_trajectory, yield_trajectory

if TYPE_CHECKING:
    from art.backends.local import LocalBackend
    from art.backends.remote import RemoteBackend
    from art.serverless import ServerlessBackend

__version__ = "0.1.0"

__all__ = [
    "Backend",
    "DatasetBatch",
    "History",
    "LoRAConfig",
    "LocalBackend",
    "LocalTrainResult",
    "MegatronTopologyConfig",
    "Message",
    "MessageOrChoice",
    "Messages",
    "MessagesAndChoices",
    "Model",
    "PydanticException",
    "Registration",
    "RemoteBackend",
    "RuntimeOptions",
    "ServerlessBackend",
    "ServerlessTrainResult",
    "TinkerBackend",
    "TooManyExceptions",
    "Tools",
    "TrainConfig",
    "TrainResult",
    "TrainSFTConfig",
    "TrainSpec",
    "TrainableModel",
    "Trajectory",
    "TrajectoryGroup",
    "auto_trajectory",
    "capture_auto_trajectory",
    "capture_yielded_trajectory",
    "current_trajectory",
    "dev",
    "gather_trajectories",
    "gather_trajectory_groups",
    "iterate_dataset",
    "no_capture",
    "retry",
    "trajectory",
    "trajectory_group",
    "trajectory_group_batches",
    "yield_trajectory",
]


def __getattr__(name: str) -> Any:
    # LocalBackend's module is light, but resolve it lazily so `import art` never touches the service.
    if name == "rewards":  # `art.rewards.ruler_score_group(...)` after a plain `import art`
        import importlib

        return importlib.import_module(".rewards", __name__)
    if name == "LocalBackend":
        from art.backends.local import LocalBackend

        return LocalBackend
    if name == "ServerlessBackend":  # the reference's serverless client (httpx only)
        from art.serverless import ServerlessBackend

        return ServerlessBackend
    if name == "TinkerBackend":  # light; the tinker SDK loads at its first registration
        from art.backends.tinker import TinkerBackend

        return TinkerBackend
    if name == "RemoteBackend":  # httpx only, but `import art` need not load it
        from art.backends.remote import RemoteBackend

        return RemoteBackend
    raise AttributeError(f"module 'art' has no attribute {name!r}")
