"""art.utils.deployment (the reference's): a checkpoint deployed to Together through a stand-in of its API
and of the AWS CLI, and to W&B as an offline `lora` artifact; wrong inputs refused with the reason."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, ClassVar

import pytest
from helpers_s3 import aws_calls, install_fake_aws

import art
from art.errors import LoRADeploymentTimedOutError, UnsupportedBaseModelDeploymentError
from art.utils.deployment import TogetherDeploymentConfig, WandbDeploymentConfig, deploy_model
from art.utils.deployment import together as together_module


class _Together(BaseHTTPRequestHandler):
    """Together's model upload and jobs API, in memory: an upload makes a job that completes when read twice."""

    jobs: ClassVar[dict[str, dict[str, Any]]] = {}
    uploads: ClassVar[list[dict[str, Any]]] = []
    auth: ClassVar[list[str | None]] = []

    def _send(self, body: Any) -> None:
        data = json.dumps(body).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_POST(self) -> None:
        self.auth.append(self.headers.get("Authorization"))
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        self.uploads.append(body)
        job_id = f"job-{len(self.jobs)}"
        self.jobs[job_id] = {"reads": 0, "name": body["model_name"]}
        self._send({"data": {"job_id": job_id}})

    def do_GET(self) -> None:
        if self.path.endswith("/jobs"):
            self._send({"data": [{"job_id": k, "updated_at": i, "args": {"modelName": f"acct/{j['name']}"}}
                                 for i, (k, j) in enumerate(self.jobs.items())]})  # fmt: skip
            return
        job = self.jobs[self.path.rsplit("/", 1)[1]]
        job["reads"] += 1
        status = "Complete" if job["reads"] >= 2 else "Running"
        self._send(
            {
                "status": status,
                "args": {"modelName": f"acct/{job['name']}"},
                "status_updates": [{"message": status}],
            }
        )

    def log_message(self, *_: Any) -> None:
        pass


@pytest.fixture
def together(monkeypatch: pytest.MonkeyPatch) -> Iterator[type[_Together]]:
    _Together.jobs, _Together.uploads, _Together.auth = {}, [], []
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Together)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    monkeypatch.setenv("TOGETHER_BASE_URL", f"http://127.0.0.1:{server.server_address[1]}/v1")
    monkeypatch.setenv("TOGETHER_API_KEY", "tk")
    monkeypatch.setattr(together_module, "POLL_SECONDS", 0.0)
    yield _Together
    server.shutdown()


def checkpoint(tmp_path: Path, base_model: str) -> tuple[art.TrainableModel, Path]:
    model = art.TrainableModel(
        name="agent", project="proj", base_model=base_model, base_path=str(tmp_path / "art")
    )
    folder = tmp_path / "checkpoint"
    folder.mkdir()
    (folder / "adapter_config.json").write_text('{"r": 8}')
    (folder / "adapter_model.safetensors").write_bytes(b"weights")
    return model, folder


async def test_deploy_to_together_uploads_the_presigned_zip_and_waits_for_the_job(
    together: type[_Together], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    s3 = install_fake_aws(tmp_path, monkeypatch)
    model, folder = checkpoint(tmp_path, "Qwen/Qwen2.5-14B-Instruct")
    config = TogetherDeploymentConfig(s3_bucket="bucket")
    result = await deploy_model(model, str(folder), 5, "together", config)
    assert result.inference_model_name == "acct/proj-agent-5"
    (upload,) = together.uploads
    assert upload["model_type"] == "adapter" and upload["base_model"] == "Qwen/Qwen2.5-14B-Instruct"
    assert upload["model_source"].startswith("https://") and together.auth == ["Bearer tk"]
    assert any(call[:2] == ["s3", "presign"] for call in aws_calls(s3))
    # deployed before and not failed: the job is reused, nothing uploaded again
    assert (
        await deploy_model(model, str(folder), 5, "together", config)
    ).inference_model_name == "acct/proj-agent-5"
    assert len(together.uploads) == 1


async def test_wrong_inputs_are_refused_with_the_reason(
    together: type[_Together], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    install_fake_aws(tmp_path, monkeypatch)
    model, folder = checkpoint(tmp_path, "my/own-base")
    with pytest.raises(FileNotFoundError, match="Checkpoint not found"):
        await deploy_model(model, str(tmp_path / "nope"), 1, "together", TogetherDeploymentConfig())
    with pytest.raises(ValueError, match="Config is required for provider 'together'"):
        await deploy_model(model, str(folder), 1, "together")
    with pytest.raises(TypeError, match="Expected WandbDeploymentConfig"):
        await deploy_model(model, str(folder), 1, "wandb", TogetherDeploymentConfig())
    with pytest.raises(UnsupportedBaseModelDeploymentError, match="my/own-base is not supported"):
        await deploy_model(model, str(folder), 1, "together", TogetherDeploymentConfig(s3_bucket="b"))


async def test_a_together_job_not_done_in_time_raises_lora_deployment_timed_out(
    together: type[_Together], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """As the reference: a job still running past the deadline is `LoRADeploymentTimedOutError` (504)."""
    install_fake_aws(tmp_path, monkeypatch)
    # the stand-in's job is still running at its first read
    monkeypatch.setattr(together_module, "TIMEOUT_SECONDS", 0.0)
    model, folder = checkpoint(tmp_path, "Qwen/Qwen2.5-14B-Instruct")
    with pytest.raises(LoRADeploymentTimedOutError, match=r"timed out .* Job ID: job-0") as caught:
        await deploy_model(model, str(folder), 5, "together", TogetherDeploymentConfig(s3_bucket="bucket"))
    assert caught.value.status_code == 504


def test_deploy_to_wandb_logs_a_lora_artifact(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("wandb")
    import asyncio

    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_API_KEY", "x" * 40)
    monkeypatch.setenv("WANDB_DIR", str(tmp_path / "wandb"))
    (tmp_path / "wandb").mkdir()
    model, folder = checkpoint(tmp_path, "Qwen/Qwen2.5-14B-Instruct")
    model.entity = "team"
    result = asyncio.run(
        deploy_model(model, str(folder), 3, "wandb", WandbDeploymentConfig(provenance=["local-rl"]))
    )
    assert result.inference_model_name == "wandb-artifact:///team/proj/agent:step3"
    (run,) = (tmp_path / "wandb" / "wandb").glob("offline-run-*")
    assert any(p.suffix == ".wandb" for p in run.iterdir())
