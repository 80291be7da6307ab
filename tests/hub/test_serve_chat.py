"""`art serve --model NAME_OR_PATH`: a base model served at start, to chat with by the name given (no
training); and a chat for a model the server does not serve is a 404 that lists what it serves and says how
to add one."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("fastapi", reason="needs the `local` extra: pip install -e '.[local]'")

from fastapi.testclient import TestClient
from helpers_serve import start_serve
from typer.testing import CliRunner

from art.cli import app
from art.hub.app import ServeConfig, build_app
from art.types import RuntimeOptions

CHAT = {"messages": [{"role": "user", "content": "Say hi"}], "max_tokens": 4, "temperature": 0}


def test_the_model_flags_reach_the_server_checked_first(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import art.hub.app

    started: list[ServeConfig] = []
    monkeypatch.setattr(art.hub.app, "run", lambda config, echo: started.append(config))
    folder = tmp_path / "my-model"
    folder.mkdir()
    (folder / "config.json").write_text("{}")
    args = ["serve", "--path", str(tmp_path), "--port", "0"]
    result = CliRunner().invoke(app, [*args, "--model", str(folder), "--base-model", "smollm2-135m"])
    assert result.exit_code == 0, result.output
    assert started[0].chat_models == (str(folder), "smollm2-135m")  # as typed: the names clients send
    result = CliRunner().invoke(app, [*args, "--model", "qwen-does-not-exist"])
    assert result.exit_code == 2 and "--model: qwen-does-not-exist: unknown name" in result.output
    assert len(started) == 1  # refused before the server started


def test_a_base_model_is_served_by_its_given_name_and_an_unknown_one_is_a_404_that_says_what_to_do(
    tiny_model_path: Path, tmp_path: Path
) -> None:
    name = str(tiny_model_path)
    config = ServeConfig(path=tmp_path / ".art", options=RuntimeOptions(device="cpu"), chat_models=(name,))
    server, _ = build_app(config, api_key=None)
    with TestClient(server) as client:
        listed = client.get("/v1/models").json()["data"]
        assert [m["id"] for m in listed] == [name]
        answer = client.post("/v1/chat/completions", json={"model": name, **CHAT})
        assert answer.status_code == 200, answer.text
        assert (
            answer.json()["model"] == name and answer.json()["choices"][0]["message"]["role"] == "assistant"
        )

        for route, body in (
            ("/v1/chat/completions", {"model": "qwen-does-not-exist", **CHAT}),
            ("/v1/completions", {"model": "qwen-does-not-exist", "prompt": "hi", "max_tokens": 2}),
        ):
            missing = client.post(route, json=body)
            assert missing.status_code == 404
            error: dict[str, Any] = missing.json()["error"]
            assert error["code"] == "model_not_found" and error["param"] == "model"
            message = error["message"]
            assert message.startswith("The model `qwen-does-not-exist` does not exist")
            assert f"Served models: {name}." in message
            assert "art serve --model NAME" in message and "RemoteBackend" in message
    assert not (tmp_path / ".art" / ".serve" / "models.json").exists()  # chat models are not a record


def test_a_404_on_a_server_serving_nothing_says_so(tmp_path: Path) -> None:
    server, _ = build_app(ServeConfig(path=tmp_path), api_key=None)
    with TestClient(server) as client:
        missing = client.post("/v1/chat/completions", json={"model": "smollm2-135m", **CHAT})
    assert missing.status_code == 404
    message = missing.json()["error"]["message"]
    assert "Served models: none." in message and "art serve --model NAME" in message


def test_art_serve_model_lets_an_openai_client_chat_at_once(tiny_model_path: Path, tmp_path: Path) -> None:
    """As a user does it: `art serve --model PATH`, then the `openai` client, by the name typed."""
    from openai import NotFoundError, OpenAI

    server = start_serve(tmp_path / "art", "--model", str(tiny_model_path))
    try:
        out = server.out.read_text()
        assert f"(models: {tiny_model_path} (chat))" in out, out
        client = OpenAI(base_url=server.url + "/v1", api_key=server.key)
        assert [m.id for m in client.models.list()] == [str(tiny_model_path)]
        reply = client.chat.completions.create(model=str(tiny_model_path), **CHAT)  # type: ignore[call-overload]
        assert reply.choices[0].message.role == "assistant"
        with pytest.raises(NotFoundError, match="art serve --model NAME"):
            client.chat.completions.create(model="other", **CHAT)  # type: ignore[call-overload]
    finally:
        server.stop()


def test_a_chat_model_that_does_not_load_stops_the_start_in_one_line(tmp_path: Path) -> None:
    import subprocess
    import sys

    folder = tmp_path / "not-a-model"
    folder.mkdir()
    (folder / "config.json").write_text("{}")  # passes the check (a model's folder), fails to load
    done = subprocess.run(
        [sys.executable, "-m", "art", "serve", "--path", str(tmp_path / ".art"), "--port", "0", "--model", str(folder)],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 2, done.stderr[-2000:]
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith(f"art serve: --model: {folder} could not be served for chat: "), last
    assert "ART serving at" not in done.stdout


def test_the_vllm_engine_serves_a_chat_model_without_a_trainers_copy(
    tiny_model_path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With `--engine vllm` the model is vLLM's own copy (here the fake vLLM of tests/engines/vllm): only the
    tokenizer loads in the server's process."""
    import stat
    import sys

    import art.base_model.loader

    fake_root = Path(__file__).parents[1] / "engines" / "vllm" / "fake_vllm"
    python = tmp_path / "python"
    python.write_text(f'#!/bin/sh\nPYTHONPATH="{fake_root}" exec "{sys.executable}" "$@"\n')
    python.chmod(python.stat().st_mode | stat.S_IXUSR)

    def no_weights(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("the weights were loaded in the server's process")

    monkeypatch.setattr(art.base_model.loader, "load_model_and_tokenizer", no_weights)
    options = RuntimeOptions(device="cpu", engine="vllm", vllm_python=str(python), vllm_startup_timeout=60)
    name = str(tiny_model_path)
    config = ServeConfig(path=tmp_path / ".art", options=options, chat_models=(name,))
    server, hub = build_app(config, api_key=None)
    with TestClient(server) as client:
        assert [m["id"] for m in client.get("/v1/models").json()["data"]] == [name]
        answer = client.post("/v1/chat/completions", json={"model": name, **CHAT})
        assert answer.status_code == 200, answer.text
        assert list(hub.chat_models) == [name]
    assert hub.chat_models == {}  # closed with the server
