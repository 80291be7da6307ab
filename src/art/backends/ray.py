"""`RayBackend`: `LocalBackend` whose services run their inference replicas and trainer ranks on a Ray cluster.

The service itself (the step's lifecycle, the record, the OpenAI-compatible server, the canary's reference
trainer) runs in this process, as with `LocalBackend`; only where its engines and ranks run changes
(`RuntimeOptions.ray_address`, `inference_replicas`, `train_ranks`). User code is unchanged apart from the
backend. Checkpoints and the base model must be on storage every node reads (a shared path: NFS, a cluster
file system); give it as `path` or as the model's `base_path`.

The address is checked when the backend is made: one that does not answer, or a cluster without room for
the replicas and ranks asked for, is a `RayClusterError` before anything loads.
"""

from __future__ import annotations

from typing import Any

from art.backends.local import LocalBackend
from art.cluster.ray_cluster import connect
from art.types import RuntimeOptions


class RayBackend(LocalBackend):
    """Trainable models served and trained on a Ray cluster (see the module docstring).

    Args:
        address: the cluster's head node, "host:port" (what `ray start --head` printed).
        inference_replicas: inference engines (one actor each, spread over the nodes) behind one endpoint.
        train_ranks: trainer ranks (one actor each, torch.distributed: gloo on CPUs, NCCL on GPUs).
        path: where the records live; must be shared by every node (checkpoints are read by the replicas
            and written by rank 0 wherever they run).
        options: the other runtime switches (`art.RuntimeOptions`); `**kwargs`: `LocalBackend`'s keywords.

    Example:
        backend = RayBackend(address="10.0.0.2:6379", inference_replicas=2, train_ranks=2, path="/shared/.art")
        await model.register(backend)
    """

    def __init__(
        self,
        address: str,
        *,
        inference_replicas: int = 1,
        train_ranks: int = 1,
        path: str | None = None,
        options: RuntimeOptions | None = None,
        **kwargs: Any,
    ) -> None:
        base = options or RuntimeOptions()
        ray_options = RuntimeOptions.model_validate(
            {
                **base.model_dump(),
                "ray_address": address,
                "inference_replicas": inference_replicas,
                "train_ranks": train_ranks,
            }
        )
        super().__init__(path=path, options=ray_options, **kwargs)
        connect(address, self.options)  # before anything loads: the address answers, the cluster has room
