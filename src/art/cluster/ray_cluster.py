"""Reaching a Ray cluster and asking what it has, before anything loads.

`connect(address, options)`: the address must answer (a TCP connection within seconds: `ray.init` on an
address nobody listens at would retry for a long time), `ray.init` joins the cluster (passing this process's
Hugging Face and ART settings on to every worker), and the cluster must have room for the replicas and ranks
the options ask for (one CPU each, one GPU each on a GPU cluster). Each failure is a `RayClusterError`
naming the address, what it has and the fix.
"""

from __future__ import annotations

import importlib.util
import os
import socket
import time

from art.types import RuntimeOptions

INSTALL = "pip install 'agent-reinforcement-trainer[ray]'"
FORWARDED_ENV = ("HF_", "TRANSFORMERS_", "ART_", "TOKENIZERS_", "WANDB_MODE", "LITELLM_LOCAL_MODEL_COST_MAP")


class RayClusterError(ConnectionError):
    """The Ray cluster cannot be used as asked; the message names the address and the fix."""


def require_ray() -> None:
    """Raise RayClusterError with the install command when Ray is not installed."""
    if importlib.util.find_spec("ray") is None:
        raise RayClusterError(f"Ray is not installed: {INSTALL}")


def host_port(address: str) -> tuple[str, int]:
    """("host", port) of a Ray address "host:port" (ValueError naming the form otherwise).

    Example:
        >>> host_port("10.0.0.2:6379")
        ('10.0.0.2', 6379)
    """
    host, _, port = address.rpartition(":")
    if not host or not port.isdigit():
        raise ValueError(f"ray_address={address!r}: give the head node's host:port, e.g. 127.0.0.1:6379")
    return host, int(port)


def check_address(address: str, timeout: float = 5.0) -> None:
    """Raise RayClusterError unless something listens at `address` (the head node's GCS)."""
    host, port = host_port(address)
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return
    except OSError as exc:
        raise RayClusterError(
            f"the Ray cluster at {address} does not answer ({exc.strerror or exc}); start one with "
            f"`ray start --head --port {port}` on {host}, or give the address `ray start --head` printed"
        ) from None


def wait_for_nodes(address: str, count: int, timeout: float = 600.0) -> int:
    """Wait until the cluster at `address` answers and `count` of its nodes are alive (a multi-node task's
    head, before `art serve` places its actors); returns how many are. RayClusterError after `timeout` s."""
    require_ray()
    import ray

    deadline = time.monotonic() + timeout
    while True:
        try:
            check_address(address, timeout=2.0)
            break
        except RayClusterError:
            if time.monotonic() > deadline:
                raise
            time.sleep(1.0)
    ray.init(address=address, log_to_driver=False, configure_logging=False)
    try:
        while (alive := _alive_nodes()) < count:
            if time.monotonic() > deadline:
                raise RayClusterError(
                    f"only {alive} of {count} nodes joined the Ray cluster at {address} within {timeout:g} s"
                )
            time.sleep(1.0)
        return alive
    finally:
        ray.shutdown()


def _alive_nodes() -> int:
    import ray

    nodes: list[dict[str, object]] = ray.nodes()  # type: ignore[no-untyped-call]
    return len([node for node in nodes if node["Alive"]])


def cluster_resources(*, free: bool = False) -> dict[str, float]:
    """The joined cluster's resources ("CPU", "GPU", ...): all of them, or with `free` those not in use."""
    import ray

    found: dict[str, float] = ray.available_resources() if free else ray.cluster_resources()  # type: ignore[no-untyped-call]
    return found


def node_ip_address() -> str:
    """This Ray worker's node address (where a process group's rendezvous listens)."""
    import ray.util

    address: str = ray.util.get_node_ip_address()  # type: ignore[no-untyped-call]
    return address


def actor_resources(options: RuntimeOptions, cluster: dict[str, float]) -> dict[str, float]:
    """What one replica or rank asks of Ray: a CPU, and a GPU where the cluster has GPUs and the options
    do not ask for the CPU."""
    gpu = cluster.get("GPU", 0.0) > 0 and options.device != "cpu"
    return {"num_cpus": 1.0, "num_gpus": 1.0 if gpu else 0.0}


def connect(address: str, options: RuntimeOptions) -> dict[str, float]:
    """Join the cluster at `address` and check it has room for `options`' replicas and ranks; returns what
    each actor asks for (`actor_resources`). Safe to call again (joins once)."""
    require_ray()
    check_address(address)
    import ray

    if not ray.is_initialized():
        env = {k: v for k, v in os.environ.items() if k.startswith(FORWARDED_ENV)}
        ray.init(
            address=address,
            namespace="art",
            runtime_env={"env_vars": env},
            log_to_driver=False,
            configure_logging=False,
        )
    cluster = cluster_resources()
    each = actor_resources(options, cluster)
    actors = options.inference_replicas + (options.ranks if options.ranks > 1 else 0)
    for resource, key in (("CPU", "num_cpus"), ("GPU", "num_gpus")):
        need = each[key] * actors
        have = float(cluster.get(resource, 0.0))
        if need > have:
            raise RayClusterError(
                f"the Ray cluster at {address} has {have:g} {resource}(s); {options.inference_replicas} "
                f"inference replica(s) and {options.ranks if options.ranks > 1 else 0} trainer rank(s) need "
                f"{need:g} (one each): add nodes, or ask for fewer"
            )
    return each
