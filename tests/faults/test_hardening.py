"""The lesser holes of issue 41, each closed: `base_model` paths limited to the server's roots (and its
answers say nothing about which files exist), a symlinked checkpoint folder cannot make a delete reach
outside the record, short API keys, control characters in `base_model`, and two Authorization headers."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.importorskip("torch")

import httpx

from art.backends.remote_protocol import ModelCreate
from art.hub.app import ServeConfig, ServeError, build_app, load_or_create_api_key
from art.hub.models import HubError, ServiceHub
from art.openai_server.http import ServerThread
from art.record.storage import CHECKPOINT_MANIFEST, ModelStorage
from art.types import RuntimeOptions

KEY = "hardening-test-key-0123456789"


async def test_base_model_paths_outside_the_roots_are_refused_alike_whether_they_exist_or_not(
    tmp_path: Path,
) -> None:
    root = tmp_path / "models"
    (root / "inside").mkdir(parents=True)
    outside = tmp_path / "secret"
    outside.mkdir()
    (root / "link").symlink_to(outside)  # a link under the root leading out of it
    hub = ServiceHub(tmp_path / "art", RuntimeOptions(), base_model_roots=(root,))
    messages = {}
    for name in (str(outside), str(tmp_path / "no-such-folder"), "/etc", "../../etc", str(root / "link")):
        with pytest.raises(HubError) as caught:
            await hub.create(ModelCreate(project="p", name="m", base_model=name))
        assert caught.value.status == 422 and caught.value.param == "base_model"
        messages[name] = str(caught.value).replace(repr(name), "<base_model>")
    assert len(set(messages.values())) == 1, messages  # the same answer, existing or not
    assert f"--base-model-root: {root}" in next(iter(messages.values()))
    # No roots configured: paths are refused, ids and short names are not (they fail later, offline).
    bare = ServiceHub(tmp_path / "art", RuntimeOptions())
    with pytest.raises(HubError, match="none are configured"):
        await bare.create(ModelCreate(project="p", name="m", base_model=str(root / "inside")))
    from art.hub.models import check_base_model

    for allowed in ("HuggingFaceTB/SmolLM2-135M-Instruct", "smollm2-135m", "gpt2"):
        check_base_model(allowed, ())
    check_base_model(str(root / "inside"), (root,))


def test_a_control_character_in_base_model_is_refused() -> None:
    with pytest.raises(ValueError, match="control characters"):
        ModelCreate(project="p", name="m", base_model="gpt2\n2026-01-01 INFO forged line")


def test_deleting_a_symlinked_checkpoint_never_touches_what_it_points_to(tmp_path: Path) -> None:
    storage = ModelStorage(tmp_path / "art", "p", "m")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / CHECKPOINT_MANIFEST).write_text(json.dumps({"step": 3}))
    (elsewhere / "precious.txt").write_text("keep me")
    storage.checkpoints_dir.mkdir(parents=True)
    storage.checkpoint_dir(3).symlink_to(elsewhere)
    assert storage.checkpoint_steps() == [3]
    storage.delete_checkpoint(3)
    assert not os.path.lexists(storage.checkpoint_dir(3))
    assert (elsewhere / CHECKPOINT_MANIFEST).exists() and (
        elsewhere / "precious.txt"
    ).read_text() == "keep me"


def test_a_short_api_key_is_refused(tmp_path: Path) -> None:
    key_file = tmp_path / "api_key"
    key_file.write_text("x\n")
    key_file.chmod(0o600)
    with pytest.raises(ServeError, match="has 1 characters; at least 16 are required"):
        load_or_create_api_key(key_file)


@pytest.fixture
def serve_url(tmp_path: Path) -> Iterator[str]:
    app, _ = build_app(ServeConfig(path=tmp_path / "art"), api_key=KEY)
    server = ServerThread(app)
    yield server.start().removesuffix("/v1")
    server.close()


async def test_two_authorization_headers_are_refused_whichever_comes_first(serve_url: str) -> None:
    good, bad = ("Authorization", f"Bearer {KEY}"), ("Authorization", "Bearer wrong")
    async with httpx.AsyncClient(base_url=serve_url, timeout=30) as client:
        assert (await client.get("/health", headers=[good])).status_code == 200
        for headers in ([good, bad], [bad, good], [good, good]):
            response = await client.get("/v1/art/models", headers=headers)
            assert response.status_code == 401, (headers, response.text)


async def test_the_api_refuses_a_base_model_with_a_newline_with_422(serve_url: str) -> None:
    body = {"project": "p", "name": "m", "base_model": "gpt2\nINFO forged"}
    async with httpx.AsyncClient(base_url=serve_url, headers={"Authorization": f"Bearer {KEY}"}) as client:
        response = await client.post("/v1/art/models", json=body)
    error = response.json()["error"]
    assert response.status_code == 422 and error["param"] == "base_model", response.text
    assert "control characters" in error["message"], error  # refused as such, before anything loads
