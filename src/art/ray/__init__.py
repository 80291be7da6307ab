"""`art.ray`: `RayBackend`, the service with its inference replicas and trainer ranks as Ray actors on a cluster.

    from art.ray import RayBackend
    backend = RayBackend(address="head-node:6379", inference_replicas=2, train_ranks=2, path="/shared/.art")
    await model.register(backend)      # the rest of the script is unchanged

The code lives in its rooms: `art.backends.ray` (the backend), `art.cluster.ray_cluster` (reaching the
cluster), `art.cluster.replicas` (K engines behind one endpoint), `art.cluster.ray_ranks` (N rank
actors), `art.testing.local_ray_cluster` (a cluster on 127.0.0.1). Needs the `ray` extra; docs/scale.md.
Nothing is imported until used.
"""

import importlib
from typing import Any

__all__ = ["RayBackend"]


def __getattr__(name: str) -> Any:
    return getattr(importlib.import_module("art.backends.ray"), name)
