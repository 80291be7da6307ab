"""`art serve` and `RemoteBackend` under faults (issue 41, D3 D4 E2 U1 U2): a server that lost the record a
client trained is refused, not trained from step 1 again; a full disk answers 507 and queues or creates
nothing; a step with NaN metrics reaches the client and survives a restart of the server."""

from __future__ import annotations

import asyncio
import errno
import math
import tempfile
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("torch")

import httpx
from faults_loop import make_model, play_step

import art
import art.hub.jobs as jobs_module
import art.record.storage as storage
from art.backends.remote import RemoteBackend, RemoteRecordError, TrainingJobFailed
from art.hub.app import ServeConfig, build_app
from art.hub.models import ServiceHub
from art.openai_server.http import ServerThread
from art.types import RuntimeOptions

KEY = "remote-faults-test-key-0123456789"
ROOTS = (Path(tempfile.gettempdir()),)
FAST = RuntimeOptions(dtype="float32", train_compile=False, engine_compile="off")


class Serve:
    """`art serve`'s app in this process (a thread), on `port` (0: a free one)."""

    def __init__(self, path: Path, port: int = 0) -> None:
        config = ServeConfig(path=path, progress=False, base_model_roots=ROOTS, options=FAST)
        app, self.hub = build_app(config, api_key=KEY)
        self.server = ServerThread(app)
        self.url = self.server.start("127.0.0.1", port).removesuffix("/v1")
        self.port = int(self.url.rsplit(":", 1)[1])

    def close(self) -> None:
        self.server.close()


def hosted(hub: ServiceHub) -> Any:
    return next(iter(hub.models.values()))


def train_lines(model: art.TrainableModel) -> list[int]:
    return [int(e["step"]) for e in model.history() if any(k.startswith("train/") for k in e)]


async def test_a_server_that_lost_the_record_is_refused_not_trained_from_step_1_again(
    tiny_model_path: Path, tmp_path: Path
) -> None:
    first = Serve(tmp_path / "server")
    model = make_model(tmp_path / "client", tiny_model_path)
    backend = RemoteBackend(first.url, KEY, progress=False)
    try:
        await model.register(backend)
        groups = await play_step(model, 0)
        assert (await model.train(groups, config=art.TrainConfig(learning_rate=1e-2))).step == 1
    finally:
        first.close()
    # The server comes back on the same port with an empty folder.
    empty = Serve(tmp_path / "empty-server", port=first.port)
    try:
        with pytest.raises(RemoteRecordError, match="holds another record of faults/loop") as caught:
            await model.train(groups, config=art.TrainConfig(learning_rate=1e-2))
        assert "is at step 0, this client trained record" in str(caught.value)
        assert "its history" in str(caught.value) and "reaches step 1" in str(caught.value)
        assert train_lines(model) == [1]  # nothing trained or logged at a reused step
        # A new client process on the same record is refused too, with or without the remembered id.
        again = make_model(tmp_path / "client", tiny_model_path)
        with pytest.raises(RemoteRecordError):
            await again.register(RemoteBackend(empty.url, KEY, progress=False))
        stored = again.storage.read_model_json() or {}
        again.storage.write_model_json({k: v for k, v in stored.items() if k != "server_record_id"})
        with pytest.raises(RemoteRecordError, match="already trained up to step 1"):
            await again.register(RemoteBackend(empty.url, KEY, progress=False))
        again.storage.write_model_json(stored)
    finally:
        empty.close()
    # Back on its own folder: the same record, and training goes on at step 2.
    restored = Serve(tmp_path / "server", port=first.port)
    try:
        groups = await play_step(model, 1)
        assert (await model.train(groups, config=art.TrainConfig(learning_rate=1e-2))).step == 2
        assert train_lines(model) == [1, 2]
    finally:
        await backend.close()
        restored.close()


def disk_full(*args: Any, **kwargs: Any) -> None:
    raise OSError(errno.ENOSPC, "No space left on device")


async def test_full_disk_507_nan_metrics_and_set_aside_checkpoints_over_http(
    tiny_model_path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "server"
    serve = Serve(path)
    headers = {"Authorization": f"Bearer {KEY}"}
    create = {"project": "faults", "name": "loop", "base_model": str(tiny_model_path)}
    try:
        async with httpx.AsyncClient(base_url=serve.url, headers=headers, timeout=300) as client:
            # Creating a model on a full disk: 507 saying so (not a 422 blaming base_model), no path shown.
            with monkeypatch.context() as patch:
                patch.setattr(storage.ModelStorage, "write_model_json", disk_full)
                response = await client.post("/v1/art/models", json=create)
            assert response.status_code == 507, response.text
            message = response.json()["error"]["message"]
            assert "No space left on device (ENOSPC)" in message and str(path) not in message, message
            assert (await client.post("/v1/art/models", json=create)).status_code == 201

            model = make_model(tmp_path / "client", tiny_model_path)
            backend = RemoteBackend(serve.url, KEY, progress=False)
            await model.register(backend)
            groups = await play_step(model, 0)
            jobs = "/v1/art/models/faults/loop/training-jobs"
            body = {"trajectory_groups": [g.model_dump(mode="json") for g in groups]}
            key = {"Idempotency-Key": "job-on-a-full-disk"}
            # Submitting a job on a full disk: 507, and nothing queued (the same key works once there is room).
            with monkeypatch.context() as patch:
                patch.setattr(jobs_module, "atomic_write_text", disk_full)
                response = await client.post(jobs, json=body, headers=key)
            assert response.status_code == 507, response.text
            assert "No space left on device (ENOSPC)" in response.json()["error"]["message"]
            assert (await client.get(jobs)).json() == []
            accepted = await client.post(jobs, json=body, headers=key)
            assert accepted.status_code == 202, accepted.text
            assert (await backend.wait_for_job(accepted.json()["id"])).step == 1

            # A step whose loss is NaN: the client gets it (not a validation error), and so does a restart.
            service = hosted(serve.hub).service
            real_train = service.train

            async def nan_train(*args: Any, **kwargs: Any) -> Any:
                result = await real_train(*args, **kwargs)
                result.metrics.update(loss=math.nan, grad_norm=math.inf)
                return result

            service.train = nan_train
            result = await backend.train(model, await play_step(model, 1), learning_rate=1e-2)
            assert (
                result.step == 2
                and math.isnan(result.metrics["loss/train"])
                and result.metrics["loss/grad_norm"] == math.inf
            )
            nan_job = (await backend.recent_training_jobs(model, limit=1))[0]

            # A step that fails after its commit leaves a checkpoint set aside: listed, then purged.
            def broken_load(step: int) -> None:
                raise RuntimeError("injected load failure")

            service._load_into_engine = broken_load
            with pytest.raises(TrainingJobFailed):
                await backend.train(model, groups, learning_rate=1e-2)
            rejected = await backend.rejected_checkpoints(model)
            assert [r.step for r in rejected] == [3] and "injected load failure" in (rejected[0].reason or "")
            assert await backend.purge_rejected_checkpoints(model) == [rejected[0].name]
            assert await backend.rejected_checkpoints(model) == []
            await backend.close()
    finally:
        serve.close()
    # The server restarts: the job with NaN metrics is still there, with its metrics.
    serve = Serve(path)
    try:
        async with httpx.AsyncClient(base_url=serve.url, headers=headers, timeout=60) as client:
            response = await client.get(f"/v1/art/training-jobs/{nan_job.id}")
            assert response.status_code == 200, response.text
            assert response.json()["result"]["metrics"]["loss"] == "NaN"
            backend = RemoteBackend(serve.url, KEY, progress=False)
            job = await backend.training_job(nan_job.id)
            assert job.result is not None and math.isnan(job.result.metrics["loss"])
            # Its idempotency key is remembered too: reused with another request, it is refused naming the job.
            assert nan_job.idempotency_key is not None
            reused = await client.post(jobs, json=body, headers={"Idempotency-Key": nan_job.idempotency_key})
            assert reused.status_code == 409, reused.text
            assert nan_job.id in reused.json()["error"]["message"]
            await backend.close()
    finally:
        serve.close()
    await asyncio.sleep(0)
