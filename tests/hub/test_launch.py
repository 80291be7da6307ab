"""`art launch`: the SkyPilot task it writes (read back by SkyPilot's own parser), its key, and how
`RemoteBackend.from_launch` connects (SkyPilot's endpoint lookup replaced: no cloud is reachable here).

SkyPilot pins older transformers, uvicorn and click than ART, so it is read in a venv of its own, made by
`bash tests/hub/make_skypilot_venv.sh` (the README's test command runs it; ~/.cache/art/skypilot-venv or
$ART_SKYPILOT_VENV), or in this Python where it has SkyPilot.
"""

from __future__ import annotations

import importlib.util
import json
import os
import stat
import subprocess
import sys
import textwrap
import types
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from art.cli import app
from art.cluster.launch import KEY_SECRET, LaunchConfig, task_yaml, write_launch
from art.remote import RemoteBackend

SKYPILOT_VENV = Path(os.environ.get("ART_SKYPILOT_VENV", Path.home() / ".cache" / "art" / "skypilot-venv"))
# Runs where SkyPilot is: reads a task file with SkyPilot's own parser and prints what it understood.
READ_TASK = textwrap.dedent(
    """
    import json, sys
    import sky, yaml

    path, secrets = sys.argv[1], json.loads(sys.argv[2])
    if secrets:  # what `art launch --run` hands SkyPilot: the key as a secret, as `sky launch --secret` does
        config = yaml.safe_load(open(path).read())
        task = sky.Task.from_yaml_config(config, secrets_overrides=list(secrets.items()))
    else:
        task = sky.Task.from_yaml(path)
    print(json.dumps({
        "name": task.name,
        "resources": [{"accelerators": r.accelerators, "ports": r.ports} for r in task.resources],
        "envs": task.envs,
        "secret_refs": [ref.name for ref in task.managed_secret_refs],
        "secrets": {k: getattr(v, "get_secret_value", lambda v=v: v)() for k, v in task.secrets.items()},
        "workdir": task.workdir, "run": task.run, "setup": task.setup,
        "num_nodes": task.num_nodes, "storage_mounts": sorted(task.storage_mounts),
    }))
    """
)


def skypilot_reads(task: Path, secrets: dict[str, str] | None = None) -> dict[str, Any]:
    """The task as SkyPilot's parser reads it (this Python's SkyPilot, else the SkyPilot venv's)."""
    python = sys.executable if importlib.util.find_spec("sky") else str(SKYPILOT_VENV / "bin" / "python")
    if not Path(python).exists():
        pytest.skip(
            f"needs SkyPilot: `bash tests/hub/make_skypilot_venv.sh` (a venv at {SKYPILOT_VENV}) "
            "or pip install -e '.[launch]'"
        )
    done = subprocess.run(
        [python, "-c", READ_TASK, str(task), json.dumps(secrets or {})],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    parsed: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return parsed


def test_art_launch_writes_the_task_an_owner_only_key_and_instructions(tmp_path: Path) -> None:
    result = CliRunner().invoke(
        app, ["launch", "--cluster", "gpu1", "--gpu", "A100:1", "--port", "8123", "--path", str(tmp_path)]
    )
    assert result.exit_code == 0, result.output
    folder = tmp_path / ".serve" / "launch"
    task, key, record = folder / "gpu1.yaml", folder / "gpu1.key", folder / "gpu1.json"
    assert stat.S_IMODE(os.stat(key).st_mode) == 0o600
    secret = key.read_text().strip()
    assert secret not in task.read_text() and secret not in result.output  # the key never sits in the task
    assert f"sky launch -c gpu1 {task} --secret {KEY_SECRET}" in result.output
    assert 'RemoteBackend.from_launch("gpu1"' in result.output
    assert json.loads(record.read_text())["port"] == 8123
    again = CliRunner().invoke(app, ["launch", "--cluster", "gpu1", "--path", str(tmp_path)])
    assert again.exit_code == 0 and key.read_text().strip() == secret  # the cluster keeps its key


@pytest.mark.parametrize("engine", ["torch", "vllm"])
def test_skypilot_parses_the_task(tmp_path: Path, engine: str) -> None:
    config = LaunchConfig(
        cluster="c", gpu="L4:1", port=7999, engine=engine, infra="aws", source=tmp_path, path=tmp_path
    )
    files = write_launch(config)
    task = skypilot_reads(files.task)
    assert task["name"] == "art-serve"
    assert task["resources"] == [{"accelerators": {"L4": 1}, "ports": ["7999"]}]
    assert task["envs"] == {"ART_SERVE_PORT": "7999", "ART_SERVE_ENGINE": engine}
    assert task["secret_refs"] == [KEY_SECRET]  # required at launch, not written
    assert task["workdir"] == str(tmp_path.resolve())
    assert "art serve --host 0.0.0.0" in task["run"] and 'pip install -e ".[local]"' in task["setup"]
    assert ("pip install vllm" in task["setup"]) == (engine == "vllm")
    # what `art launch --run` hands SkyPilot: the key as a secret, as `sky launch --secret` does
    key = files.key.read_text().strip()
    launched = skypilot_reads(files.task, secrets={KEY_SECRET: key})
    assert launched["secrets"][KEY_SECRET] == key


def test_the_task_installs_from_pypi_without_a_checkout() -> None:
    text = task_yaml(LaunchConfig(source=None, version="0.1.0"))
    assert 'pip install "agent-reinforcement-trainer[local]==0.1.0"' in text and "workdir" not in text
    with pytest.raises(ValueError, match="engine"):
        task_yaml(LaunchConfig(engine="tensorflow"))


def test_from_launch_connects_with_the_launch_key_and_skypilots_endpoint(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    files = write_launch(LaunchConfig(cluster="gpu1", port=8123, path=tmp_path))
    asked: list[tuple[str, int]] = []
    fake = types.ModuleType("sky")
    fake.endpoints = lambda cluster, port: asked.append((cluster, port)) or "request-id"  # type: ignore[attr-defined]
    fake.get = lambda request_id: {8123: "34.1.2.3:8123"} if request_id == "request-id" else {}  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "sky", fake)
    backend = RemoteBackend.from_launch("gpu1", path=tmp_path, progress=False)
    assert asked == [("gpu1", 8123)]
    assert backend.url == "http://34.1.2.3:8123" and backend.api_key == files.key.read_text().strip()
    assert backend.progress is False
    with pytest.raises(FileNotFoundError, match="art launch --cluster other"):
        RemoteBackend.from_launch("other", path=tmp_path)


def _cluster_task(tmp_path: Path, **overrides: object) -> dict[str, object]:
    import yaml

    config = LaunchConfig(
        cluster="c", nodes=2, inference_replicas=2, train_ranks=2, record_bucket="my-art", path=tmp_path
    )
    for key, value in overrides.items():
        setattr(config, key, value)
    loaded: dict[str, object] = yaml.safe_load(task_yaml(config))
    return loaded


def test_art_launch_with_nodes_writes_a_ray_cluster_task_on_a_shared_bucket(tmp_path: Path) -> None:
    import yaml

    args = ["launch", "--cluster", "big", "--path", str(tmp_path), "--nodes", "3", "--bucket", "my-art"]
    result = CliRunner().invoke(
        app, [*args, "--inference-replicas", "2", "--train-ranks", "4", "--train-sharding", "fsdp2"]
    )
    assert result.exit_code == 0, result.output
    task = yaml.safe_load((tmp_path / ".serve" / "launch" / "big.yaml").read_text())
    assert task["num_nodes"] == 3
    assert task["file_mounts"] == {"/art": {"name": "my-art", "mode": "MOUNT"}}
    assert {k: task["envs"][k] for k in ("ART_SERVE_PATH", "ART_NUM_NODES", "ART_TRAIN_RANKS")} == {
        "ART_SERVE_PATH": "/art",
        "ART_NUM_NODES": "3",
        "ART_TRAIN_RANKS": "4",
    }
    assert task["envs"]["ART_INFERENCE_REPLICAS"] == "2" and "[local,ray]" in task["setup"]
    assert (
        task["envs"]["ART_TRAIN_SHARDING"] == "fsdp2"
        and '--train-sharding "$ART_TRAIN_SHARDING"' in task["run"]
    )
    assert "--ray-address" in task["run"] and "wait_for_nodes" in task["run"]
    # the key goes to the head's home, never into the bucket every node (and its owner's cloud) reads
    assert "--api-key-file ~/art_api_key" in task["run"] and "/art/.serve" not in task["run"]
    one = yaml.safe_load(task_yaml(LaunchConfig(path=tmp_path)))
    assert "num_nodes" not in one and "file_mounts" not in one and "--ray-address" not in one["run"]


@pytest.mark.parametrize(
    ("extra", "flag"),
    [
        (["--nodes", "2"], "--bucket"),
        (["--train-ranks", "2"], "--nodes"),
        (["--nodes", "0"], "--nodes"),
        (["--nodes", "2", "--bucket", "Not_A_Bucket"], "--bucket"),
        (["--nodes", "2", "--bucket", "b12", "--train-sharding", "zero3"], "--train-sharding"),
    ],
)
def test_art_launch_refuses_a_cluster_that_cannot_run(tmp_path: Path, extra: list[str], flag: str) -> None:
    result = CliRunner().invoke(app, ["launch", "--path", str(tmp_path), *extra])
    assert result.exit_code == 2, result.output
    assert flag in result.output
    assert not (tmp_path / ".serve" / "launch").exists()  # nothing written
    with pytest.raises(ValueError, match="record_bucket"):
        task_yaml(LaunchConfig(nodes=2))


def test_skypilot_parses_the_cluster_task(tmp_path: Path) -> None:
    files = write_launch(
        LaunchConfig(
            cluster="c", nodes=2, record_bucket="my-art", train_ranks=2, path=tmp_path, source=tmp_path
        )
    )
    task = skypilot_reads(files.task)
    assert task["num_nodes"] == 2 and "/art" in task["storage_mounts"]


@pytest.mark.cluster
async def test_the_cluster_tasks_run_script_serves_and_trains_on_two_nodes(
    tmp_path: Path, tiny_model_path: Path
) -> None:
    """The multi-node `run:` script, run for real as SkyPilot runs it on each node (node 0 and node 1, both on
    127.0.0.1): Ray head + worker, `art serve --ray-address` with 2 replicas and 2 ranks; a client trains a
    step over HTTP; stopping the nodes' process groups leaves nothing running."""
    pytest.importorskip("ray", reason="needs the `ray` extra: pip install -e '.[ray]'")
    import contextlib
    import signal
    import subprocess
    import tempfile
    import time

    import psutil
    import yaml
    from helpers_scale import make_model, play
    from helpers_serve import free_port

    run = yaml.safe_load(
        task_yaml(LaunchConfig(nodes=2, record_bucket="b", inference_replicas=2, train_ranks=2))
    )
    home = tmp_path / "home"
    (home / "art-venv" / "bin").mkdir(parents=True)  # what the task's setup made: here, this venv
    (home / "art-venv" / "bin" / "activate").write_text(
        f'export PATH="{Path(sys.executable).parent}:$PATH"\n'
    )
    port, key = free_port(), "art-cluster-test-key"
    env = {
        **os.environ,
        **run["envs"],
        "HOME": str(home),
        "ART_SERVE_PATH": str(tmp_path / "record"),  # the bucket's mount point on a real cluster
        "ART_SERVE_PORT": str(port),
        "ART_RAY_PORT": str(free_port()),
        "ART_API_KEY": key,
        "ART_TRAIN_COMPILE": "0",
        "ART_BASE_MODEL_ROOTS": tempfile.gettempdir(),
        "RAY_TMPDIR": tempfile.mkdtemp(prefix="artl-", dir="/tmp"),  # clashes with no other Ray here
        "SKYPILOT_NODE_IPS": "127.0.0.1\n127.0.0.1\n",
    }
    nodes = []
    for rank in (0, 1):
        log = open(tmp_path / f"node{rank}.log", "wb")  # noqa: SIM115 (closed with the test)
        nodes.append(
            subprocess.Popen(
                ["bash", "-c", run["run"]],
                env={**env, "SKYPILOT_NODE_RANK": str(rank)},
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        )

    def logs() -> str:
        return "\n".join(
            f"--- node {r}\n" + (tmp_path / f"node{r}.log").read_text(errors="replace")[-4000:]
            for r in (0, 1)
        )

    members: set[int] = set()
    try:
        deadline = time.monotonic() + 300
        while "ART serving at" not in (tmp_path / "node0.log").read_text(errors="replace"):
            assert nodes[0].poll() is None and time.monotonic() < deadline, logs()
            time.sleep(1)
        for node in nodes:
            members |= {p.pid for p in psutil.Process(node.pid).children(recursive=True)}
        model = make_model(tmp_path / "client", tiny_model_path, name="launched")
        async with RemoteBackend(f"http://127.0.0.1:{port}", key, progress=False) as backend:
            await model.register(backend)
            result = await backend.train(
                model, await play(model, 1), learning_rate=1e-2, micro_batch_tokens=64
            )
            assert result.step == 1 and result.metrics["train_ranks"] == 2.0, logs()
        assert (tmp_path / "record" / "scale" / "models" / "launched" / "checkpoints").is_dir(), logs()
    finally:
        for node in nodes:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(node.pid, signal.SIGTERM)
        for node in nodes:
            try:
                node.wait(30)
            except subprocess.TimeoutExpired:
                os.killpg(node.pid, signal.SIGKILL)

    def running() -> list[int]:
        alive = []
        for pid in members:
            with contextlib.suppress(psutil.NoSuchProcess):
                if psutil.Process(pid).status() != psutil.STATUS_ZOMBIE:
                    alive.append(pid)
        return alive

    deadline = time.monotonic() + 60  # a Ray node drains for up to 30 s after SIGTERM
    while running() and time.monotonic() < deadline:
        time.sleep(1)
    assert running() == [], f"processes of the nodes still running: {running()}\n{logs()}"
