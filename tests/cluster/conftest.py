"""A Ray cluster of two nodes on 127.0.0.1 (`art.testing.local_ray_cluster`: `ray start --head` + `ray start
--address`, 2 CPUs each), started for the module that asks for it and stopped after (only its processes)."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest


@pytest.fixture(scope="module")
def ray_cluster() -> Iterator[str]:
    """The head node's address ("127.0.0.1:PORT") of a running two-node cluster this process has joined."""
    pytest.importorskip("ray", reason="needs the `ray` extra: pip install -e '.[ray]'")
    import ray

    from art.testing.local_ray_cluster import LocalCluster

    with LocalCluster(nodes=2, cpus_per_node=2) as cluster:
        try:
            ray.init(address=cluster.address, namespace="art", log_to_driver=False)
            deadline = time.monotonic() + 60
            while len([n for n in ray.nodes() if n["Alive"]]) < 2:
                assert time.monotonic() < deadline, cluster.log_text()
                time.sleep(0.5)
            yield cluster.address
        finally:
            ray.shutdown()
