"""`art launch`: a SkyPilot task that runs `art serve` on a cloud GPU, and how a client connects to it.

SkyPilot provisions the machine, opens the port and runs the task; nothing here is home-made
provisioning. `write_launch` writes, under `{path}/.serve/launch/`:
- `{cluster}.yaml`: the task (installs this package, writes the key on the machine, runs `art serve` on
  0.0.0.0 with that key); the key itself is a SkyPilot secret (`secrets: {ART_API_KEY: null}`), given at
  launch, so it is never in the task file nor in SkyPilot's logs;
- `{cluster}.key`: a new random key, readable only by its owner;
- `{cluster}.json`: cluster, port and file names, which `RemoteBackend.from_launch(cluster)` reads back,
  asking SkyPilot for the cluster's endpoint of that port.
`launch(...)` (`art launch --run`) starts it with SkyPilot's Python API.

With `nodes` > 1 the task is SkyPilot's recipe for a Ray cluster (`num_nodes: N`): every node runs the same
`run:` script; node 0 (`SKYPILOT_NODE_RANK`) starts the Ray head, waits until all N nodes have joined and
runs `art serve --ray-address` with `inference_replicas` engines and `train_ranks` ranks as Ray actors
(docs/scale.md); the others join the head (the first of `SKYPILOT_NODE_IPS`) and stay until it stops. The
record (checkpoints included) must be read by every node: it lives on a SkyPilot storage bucket mounted at
`/art` on each (`record_bucket`); the key stays on the head, outside the bucket.

Verified here: the task parses with SkyPilot's own parser (`sky.Task.from_yaml`); the multi-node `run:`
script runs for real with two "nodes" on 127.0.0.1 (tests/hub/test_launch.py, `-m cluster`). Not
verified (no cloud reachable from this machine): provisioning, the install on the GPU image, the bucket
mount, the endpoint lookup.
"""

from __future__ import annotations

import json
import os
import secrets
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from art.common.engine_traits import ENGINE_TRAITS
from art.common.env import ART_API_KEY, SERVE_DEFAULT_PORT
from art.record.storage import atomic_write_text, serve_dir

PACKAGE = "agent-reinforcement-trainer"
KEY_SECRET = ART_API_KEY  # the task's secret: the variable RemoteBackend and `art serve` read
RAY_PORT = 6379
CLUSTER_RECORD = "/art"  # where the record bucket is mounted on every node of a multi-node task


@dataclass
class LaunchConfig:
    """What `art launch` asks SkyPilot for."""

    cluster: str = "art"
    gpu: str = "L4:1"  # SkyPilot `accelerators`, e.g. "A100:1", "H100:8"
    port: int = SERVE_DEFAULT_PORT
    engine: str = "torch"  # or "vllm" (installed on the machine too)
    infra: str | None = None  # SkyPilot `infra`, e.g. "aws", "gcp/us-central1"; None: any enabled
    source: Path | None = None  # a checkout of this project to sync and install; None: from PyPI
    version: str | None = None  # the PyPI version (None: the newest)
    path: Path = Path(".art")  # where the task, key and record are written on this side
    nodes: int = 1  # SkyPilot `num_nodes`; more than 1: a Ray cluster (see the module docstring)
    inference_replicas: int = 1  # `art serve --inference-replicas` on a cluster of nodes
    train_ranks: int = 1  # `art serve --train-ranks` on a cluster of nodes
    train_sharding: str = "ddp"  # `art serve --train-sharding`: ddp, or fsdp2 for a base too big for one GPU
    record_bucket: str | None = None  # SkyPilot storage mounted at /art on every node (needed for nodes > 1)
    ray_port: int = RAY_PORT  # the head's Ray port (SkyPilot's own Ray uses 6380)


@dataclass
class LaunchFiles:
    task: Path
    key: Path
    record: Path


def launch_dir(path: Path) -> Path:
    """Where `art launch` keeps its files under a client's `.art` folder."""
    return serve_dir(path) / "launch"


def default_source() -> Path | None:
    """This package's checkout, when it runs from one (an editable install); else None (install from PyPI)."""
    root = Path(__file__).resolve().parents[3]
    return root if (root / "pyproject.toml").exists() and (root / "src" / "art").is_dir() else None


def _q(value: str) -> str:
    """A YAML double-quoted scalar (JSON strings are valid YAML)."""
    return json.dumps(value)


def task_yaml(config: LaunchConfig) -> str:
    """The SkyPilot task, as YAML."""
    if config.engine not in ENGINE_TRAITS:
        raise ValueError(f"engine={config.engine!r}: use {' or '.join(map(repr, ENGINE_TRAITS))}")
    if config.nodes < 1:
        raise ValueError(f"nodes={config.nodes}: at least 1")
    if config.nodes > 1 and not config.record_bucket:
        raise ValueError(
            f"nodes={config.nodes}: give record_bucket, the storage every node reads the checkpoints from"
        )
    extra = "[local,ray]" if config.nodes > 1 else "[local]"
    if config.source is not None:
        install = f'pip install -e ".{extra}"'
    else:
        pin = f"=={config.version}" if config.version else ""
        install = f'pip install "{PACKAGE}{extra}{pin}"'
    lines = [
        "# SkyPilot task written by `art launch`: `art serve` on a cloud GPU (docs/remote.md).",
        f'# Start:   {KEY_SECRET}="$(cat KEY_FILE)" sky launch -c {config.cluster} THIS_FILE --secret {KEY_SECRET}',
        f'# Connect: art.RemoteBackend.from_launch("{config.cluster}")',
        "name: art-serve",
        *([f"num_nodes: {config.nodes}"] if config.nodes > 1 else []),
        "resources:",
        f"  accelerators: {_q(config.gpu)}",
        f"  ports: {config.port}",
    ]
    if config.infra:
        lines.append(f"  infra: {_q(config.infra)}")
    lines += [
        "envs:",
        f"  ART_SERVE_PORT: {_q(str(config.port))}",
        f"  ART_SERVE_ENGINE: {_q(config.engine)}",
        *(_cluster_envs(config) if config.nodes > 1 else []),
        "secrets:",
        f"  {KEY_SECRET}: null  # given at launch (--secret), never written here",
    ]
    if config.source is not None:
        lines.append(f"workdir: {_q(str(config.source.resolve()))}")
    if config.nodes > 1:
        lines += [
            "file_mounts:",
            f"  {CLUSTER_RECORD}:",
            f"    name: {_q(str(config.record_bucket))}",
            "    mode: MOUNT",
        ]
    setup = [
        "set -e",
        "python3 -m venv ~/art-venv",
        ". ~/art-venv/bin/activate",
        "pip install --upgrade pip",
        install,
    ]
    package = ENGINE_TRAITS[config.engine].pip_install
    if package is not None:
        setup.append(f"pip install {package}")
    run = (
        _cluster_run()
        if config.nodes > 1
        else [
            "set -e",
            ". ~/art-venv/bin/activate",
            "mkdir -p ~/.art/.serve && chmod 700 ~/.art/.serve",
            f"(umask 077 && printf '%s\\n' \"${KEY_SECRET}\" > ~/.art/.serve/api_key)",
            'exec art serve --host 0.0.0.0 --port "$ART_SERVE_PORT" --path ~/.art --device auto '
            '--engine "$ART_SERVE_ENGINE"',
        ]
    )
    lines += ["setup: |", *(f"  {line}" for line in setup), "run: |", *(f"  {line}" for line in run)]
    return "\n".join(lines) + "\n"


def _cluster_envs(config: LaunchConfig) -> list[str]:
    return [
        f"  ART_SERVE_PATH: {_q(CLUSTER_RECORD)}",
        f"  ART_RAY_PORT: {_q(str(config.ray_port))}",
        f"  ART_NUM_NODES: {_q(str(config.nodes))}",
        f"  ART_INFERENCE_REPLICAS: {_q(str(config.inference_replicas))}",
        f"  ART_TRAIN_RANKS: {_q(str(config.train_ranks))}",
        f"  ART_TRAIN_SHARDING: {_q(config.train_sharding)}",
    ]


def _cluster_run() -> list[str]:
    """The `run:` script of a multi-node task: the same on every node (see the module docstring)."""
    return [
        "set -e",
        ". ~/art-venv/bin/activate",
        'IPS="$(printf \'%s\\n\' "$SKYPILOT_NODE_IPS")"',
        'HEAD_IP="$(printf \'%s\\n\' "$IPS" | head -n1)"',
        'NODE_IP="$(printf \'%s\\n\' "$IPS" | sed -n "$((SKYPILOT_NODE_RANK + 1))p")"',
        'if [ "$SKYPILOT_NODE_RANK" != "0" ]; then',
        '  exec ray start --address "$HEAD_IP:$ART_RAY_PORT" --node-ip-address "$NODE_IP" --disable-usage-stats --block',
        "fi",
        'ray start --head --port "$ART_RAY_PORT" --node-ip-address "$HEAD_IP" --disable-usage-stats '
        "--include-dashboard=false --block &",
        "RAY_HEAD=$!",
        "trap 'kill $RAY_HEAD 2>/dev/null' EXIT",
        # every node joined before `art serve` places its actors (else it refuses a cluster too small)
        "python -c 'import sys; from art.cluster.ray_cluster import wait_for_nodes; "
        'wait_for_nodes(sys.argv[1], int(sys.argv[2]))\' "$HEAD_IP:$ART_RAY_PORT" "$ART_NUM_NODES"',
        f"(umask 077 && printf '%s\\n' \"${KEY_SECRET}\" > ~/art_api_key)",
        'art serve --host 0.0.0.0 --port "$ART_SERVE_PORT" --path "$ART_SERVE_PATH" --api-key-file ~/art_api_key '
        '--device auto --engine "$ART_SERVE_ENGINE" --ray-address "$HEAD_IP:$ART_RAY_PORT" '
        '--inference-replicas "$ART_INFERENCE_REPLICAS" --train-ranks "$ART_TRAIN_RANKS" '
        '--train-sharding "$ART_TRAIN_SHARDING"',
    ]


def write_launch(config: LaunchConfig) -> LaunchFiles:
    """Write the task, a new key (owner-only; an existing one for this cluster is kept) and the record."""
    folder = launch_dir(config.path)
    folder.mkdir(parents=True, exist_ok=True, mode=0o700)
    files = LaunchFiles(
        task=folder / f"{config.cluster}.yaml",
        key=folder / f"{config.cluster}.key",
        record=folder / f"{config.cluster}.json",
    )
    if not files.key.exists():
        fd = os.open(files.key, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(f"art-{secrets.token_urlsafe(32)}\n")
    atomic_write_text(files.task, task_yaml(config))
    record = {
        "cluster": config.cluster,
        "port": config.port,
        "task": str(files.task.resolve()),
        "key_file": str(files.key.resolve()),
    }
    atomic_write_text(files.record, json.dumps(record, indent=2) + "\n")
    return files


def instructions(config: LaunchConfig, files: LaunchFiles) -> str:
    """What to run to start the task and connect to it."""
    return (
        f"SkyPilot task: {files.task}\n"
        f"API key:       {files.key} (readable only by you)\n"
        f'Start it:      {KEY_SECRET}="$(cat {files.key})" sky launch -c {config.cluster} {files.task} '
        f"--secret {KEY_SECRET}\n"
        f"               (or: art launch --run ...)\n"
        f"Its address:   sky status --endpoint {config.port} {config.cluster}\n"
        f'Connect:       backend = art.RemoteBackend.from_launch("{config.cluster}", path="{config.path}")\n'
        f'               or art.RemoteBackend("http://<address>", api_key=open("{files.key}").read().strip())\n'
        f"Stop it:       sky down {config.cluster}"
    )


def read_key(path: Path) -> str:
    return path.read_text(encoding="utf-8").strip()


def launch(config: LaunchConfig, files: LaunchFiles) -> None:
    """Start the task with SkyPilot (`sky launch`), the key passed as a secret. Unverified here."""
    try:
        import sky
    except ImportError:
        raise RuntimeError(
            "`art launch --run` needs SkyPilot: pip install 'agent-reinforcement-trainer[launch]'"
        ) from None
    import yaml  # SkyPilot's own dependency

    task = sky.Task.from_yaml_config(
        yaml.safe_load(files.task.read_text(encoding="utf-8")),
        secrets_overrides=[(KEY_SECRET, read_key(files.key))],  # as `sky launch --secret ART_API_KEY` does
    )
    request_id = sky.launch(task, cluster_name=config.cluster)
    sky.stream_and_get(request_id)


def launch_connection(cluster: str, path: Path) -> tuple[str, str]:
    """(the URL of `art serve` on SkyPilot cluster `cluster`, its key), from the record `art launch` wrote
    under `path` and SkyPilot's endpoint of the port. Unverified here."""
    record_path = launch_dir(path) / f"{cluster}.json"
    if not record_path.exists():
        raise FileNotFoundError(
            f"{record_path} does not exist: run `art launch --cluster {cluster}` first (with the same --path)"
        )
    record = json.loads(record_path.read_text(encoding="utf-8"))
    try:
        import sky
    except ImportError:
        raise RuntimeError(
            "RemoteBackend.from_launch needs SkyPilot: pip install 'agent-reinforcement-trainer[launch]'"
        ) from None
    port = int(record["port"])
    endpoints: dict[Any, str] = sky.get(sky.endpoints(cluster, port))
    endpoint = endpoints.get(port) or endpoints.get(str(port))
    if not endpoint:
        raise RuntimeError(
            f"SkyPilot has no endpoint for port {port} of cluster {cluster!r}; is it up (`sky status`)?"
        )
    url = endpoint if str(endpoint).startswith("http") else f"http://{endpoint}"
    return url, read_key(Path(record["key_file"]))
