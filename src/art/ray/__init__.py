"""ART on a Ray cluster: the same service, with its inference replicas and trainer ranks as Ray actors.

    from art.ray import RayBackend
    backend = RayBackend(address="head-node:6379", inference_replicas=2, train_ranks=2)
    await model.register(backend)      # the rest of the script is unchanged

- `backend`   `RayBackend`: `LocalBackend` whose service places its engines and ranks on the cluster
- `cluster`   reaching the cluster (a clear error when the address does not answer) and its resources
- `replicas`  K inference engines as Ray actors behind one endpoint (retried and restarted on failure)
- `ranks`     N trainer ranks as Ray actors (`art.training.ranks.RankBackend`)

Needs the `ray` extra (`pip install 'agent-reinforcement-trainer[ray]'`); docs/scale.md says how to start a
cluster and what was verified where. Nothing is imported here until used.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .backend import RayBackend

__all__ = ["RayBackend"]


def __getattr__(name: str) -> Any:
    if name == "RayBackend":
        from .backend import RayBackend

        return RayBackend
    raise AttributeError(f"module 'art.ray' has no attribute {name!r}")
