"""`art launch`: the SkyPilot task it writes (read back by SkyPilot's own parser), its key, and how
`RemoteBackend.from_launch` connects (SkyPilot's endpoint lookup replaced: no cloud is reachable here)."""

from __future__ import annotations

import json
import os
import stat
import sys
import types
from pathlib import Path

import pytest
from typer.testing import CliRunner

from art.backends.launch import KEY_SECRET, LaunchConfig, task_yaml, write_launch
from art.cli import app
from art.remote import RemoteBackend


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
    sky = pytest.importorskip("sky", reason="needs SkyPilot: pip install -e '.[launch]'")
    import yaml

    config = LaunchConfig(
        cluster="c", gpu="L4:1", port=7999, engine=engine, infra="aws", source=tmp_path, path=tmp_path
    )
    files = write_launch(config)
    task = sky.Task.from_yaml(str(files.task))
    assert task.name == "art-serve"
    [resources] = list(task.resources)
    assert resources.accelerators == {"L4": 1} and resources.ports == ["7999"]
    assert task.envs == {"ART_SERVE_PORT": "7999", "ART_SERVE_ENGINE": engine}
    assert [ref.name for ref in task.managed_secret_refs] == [KEY_SECRET]  # required at launch, not written
    assert task.workdir == str(tmp_path.resolve())
    assert "art serve --host 0.0.0.0" in task.run and 'pip install -e ".[local]"' in task.setup
    assert ("pip install vllm" in task.setup) == (engine == "vllm")
    # what `art launch --run` hands SkyPilot: the key as a secret, as `sky launch --secret` does
    key = files.key.read_text().strip()
    launched = sky.Task.from_yaml_config(
        yaml.safe_load(files.task.read_text()), secrets_overrides=[(KEY_SECRET, key)]
    )
    assert launched.secrets[KEY_SECRET].get_secret_value() == key


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
