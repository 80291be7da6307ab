"""One writer per model record (issue 41, D1): a second service on a record is refused at once, naming the
holder; a lock left by a dead process is taken over; two `art serve` never share a folder."""

from __future__ import annotations

import asyncio
import os
import socket
from pathlib import Path

import pytest

pytest.importorskip("torch")

import httpx
from faults_loop import make_model
from helpers_serve import start_serve
from typer.testing import CliRunner

import art
from art.cli import app as cli_app
from art.local import LocalBackend
from art.record.lock import RecordInUseError
from art.types import RuntimeOptions

FAST = RuntimeOptions(dtype="float32", train_compile=False, engine_compile="off")


async def test_a_second_backend_on_a_record_is_refused_at_once_naming_the_holder(
    tiny_model_path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from art.base_model import loader

    first = make_model(tmp_path, tiny_model_path)
    async with LocalBackend(progress=False, options=FAST) as backend:
        await first.register(backend)
        steps = first.storage.checkpoint_steps()
        second = make_model(tmp_path, tiny_model_path)
        other = LocalBackend(progress=False, options=FAST)
        loads: list[str] = []
        load = loader.load_model_and_tokenizer

        def counted(base_model: str, **kwargs: object) -> object:
            loads.append(base_model)
            return load(base_model, **kwargs)  # type: ignore[arg-type]

        monkeypatch.setattr(loader, "load_model_and_tokenizer", counted)
        with pytest.raises(RecordInUseError) as caught:
            await second.register(other)
        assert loads == []  # refused before it loaded anything
        message = str(caught.value)
        assert f"pid {os.getpid()} on host {socket.gethostname()} since " in message, message
        assert "(LocalBackend)" in message and str(first.storage.root) in message, message
        assert caught.value.holder["pid"] == os.getpid()
        assert first.storage.checkpoint_steps() == steps and not first.storage.rejected_checkpoints()
        await other.close()
    # Closed: the record is free again.
    async with LocalBackend(progress=False, options=FAST) as again:
        await second.register(again)
        assert await second.get_step() == 0


async def test_two_art_serve_and_a_backend_on_one_folder_then_the_holder_is_killed(
    tiny_model_path: Path, tmp_path: Path
) -> None:
    path = tmp_path / "art"
    server = start_serve(path)
    try:
        # A second `art serve` on the same --path: refused at start, naming the first.
        result = await asyncio.to_thread(
            CliRunner().invoke, cli_app, ["serve", "--path", str(path), "--port", "0"]
        )
        assert result.exit_code == 2, result.output
        assert f"another `art serve` already serves {path}: pid {server.proc.pid} on host" in result.output
        # The first serves a model: a LocalBackend on that record is refused, naming the server.
        headers = {"Authorization": f"Bearer {server.key}"}
        body = {"project": "faults", "name": "loop", "base_model": str(tiny_model_path)}
        async with httpx.AsyncClient(base_url=server.url, headers=headers, timeout=300) as client:
            # And the other way round: a record a LocalBackend holds is refused by the server (409, naming it).
            held = art.TrainableModel(
                name="held", project="faults", base_model=str(tiny_model_path), base_path=str(path)
            )
            async with LocalBackend(progress=False, options=FAST) as holder:
                await held.register(holder)
                refused = await client.post("/v1/art/models", json={**body, "name": "held"})
                assert refused.status_code == 409, refused.text
                error = refused.json()["error"]
                assert error["param"] == "name", error
                assert f"pid {os.getpid()} on host {socket.gethostname()} since " in error["message"], error
                assert "(LocalBackend)" in error["message"], error
            created = await client.post("/v1/art/models", json={**body, "name": "held"})
            assert created.status_code == 201, created.text  # released on close: the server takes it
            created = await client.post("/v1/art/models", json=body)
            assert created.status_code == 201, created.text
        model = make_model(path, tiny_model_path)
        with pytest.raises(RecordInUseError, match=rf"pid {server.proc.pid} on host .* \(art serve\)"):
            await model.register(LocalBackend(progress=False, options=FAST))
        # kill -9 leaves the lock file behind, but no lock: the next writer takes over.
        server.kill()
        assert (model.storage.root / ".writer.lock").exists()
        async with LocalBackend(progress=False, options=FAST) as backend:
            await model.register(backend)
            assert await model.get_step() == 0
            holder = backend.service(model)._record_lock.read_holder()
            assert holder["pid"] == os.getpid() and holder["owner"] == "LocalBackend"
    finally:
        server.stop()
