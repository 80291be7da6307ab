"""`art serve` at start: the key file, binding rules, and what it prints; the OpenAPI document in docs/."""

from __future__ import annotations

import json
import os
import socket
import stat
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("fastapi", reason="needs the `local` extra: pip install -e '.[local]'")

from helpers_serve import start_serve
from typer.testing import CliRunner

from art.cli import app
from art.hub.app import ServeConfig, build_app, is_loopback, load_or_create_api_key

DOCS = Path(__file__).resolve().parents[2] / "docs"


def test_binding_beyond_loopback_without_a_key_is_refused_with_the_reason(tmp_path: Path) -> None:
    result = CliRunner().invoke(app, ["serve", "--host", "0.0.0.0", "--no-api-key", "--path", str(tmp_path)])
    assert result.exit_code == 2
    assert (
        "refusing to serve on 0.0.0.0 without an API key" in result.output
        and "drop --no-api-key" in result.output
    )


def test_a_key_file_others_can_read_is_refused(tmp_path: Path) -> None:
    key_file = tmp_path / "key"
    key_file.write_text("secret-key\n")
    key_file.chmod(0o644)
    result = CliRunner().invoke(app, ["serve", "--api-key-file", str(key_file), "--path", str(tmp_path)])
    assert result.exit_code == 2 and f"chmod 600 {key_file}" in result.output
    assert "secret-key" not in result.output


def test_a_taken_port_is_refused_at_once(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = CliRunner().invoke(app, ["serve", "--port", str(port), "--path", str(tmp_path)])
    assert result.exit_code == 2 and f"cannot bind 127.0.0.1:{port}" in result.output


def test_bad_runtime_options_are_refused(tmp_path: Path) -> None:
    result = CliRunner().invoke(app, ["serve", "--engine", "tensorflow", "--path", str(tmp_path)])
    assert result.exit_code == 2 and "engine" in result.output
    result = CliRunner().invoke(app, ["serve", "--gpu-cost-per-hour-usd", "-1", "--path", str(tmp_path)])
    assert result.exit_code == 2 and "--gpu-cost-per-hour-usd: -1.0 is not an hourly price" in result.output


def test_the_set_aside_bound_reaches_the_served_models(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import art.hub.app

    started: list[ServeConfig] = []
    monkeypatch.setattr(art.hub.app, "run", lambda config, echo: started.append(config))
    args = ["serve", "--path", str(tmp_path), "--port", "0"]
    assert CliRunner().invoke(app, [*args, "--max-rejected-checkpoints", "0"]).exit_code == 0
    assert CliRunner().invoke(app, args).exit_code == 0
    assert [c.options.max_rejected_checkpoints for c in started] == [0, 10]


def test_the_first_start_makes_an_owner_only_key_and_later_starts_reuse_it(tmp_path: Path) -> None:
    path = tmp_path / ".serve" / "api_key"
    key, created = load_or_create_api_key(path)
    assert created and len(key) > 30 and stat.S_IMODE(os.stat(path).st_mode) == 0o600
    assert stat.S_IMODE(os.stat(path.parent).st_mode) == 0o700
    assert load_or_create_api_key(path) == (key, False)


def test_loopback_names() -> None:
    assert all(is_loopback(h) for h in ("127.0.0.1", "localhost", "::1", "127.1.2.3", "[::1]"))
    assert not any(is_loopback(h) for h in ("0.0.0.0", "::", "192.168.1.4", "example.com"))


def test_a_server_on_all_interfaces_with_a_key_starts_and_says_where_the_key_is(tmp_path: Path) -> None:
    server = start_serve(tmp_path / "art", "--host", "0.0.0.0")
    try:
        out = server.out.read_text()
        key_file = (tmp_path / "art" / ".serve" / "api_key").resolve()
        assert f"API key: in {key_file} (made now, readable only by you)" in out
        assert "this machine's address" in out and server.key not in out
    finally:
        server.stop()


def test_the_openapi_document_in_docs_is_the_one_the_server_serves(tmp_path: Path) -> None:
    """docs/remote-openapi.json is generated: `python -m art.hub.app > docs/remote-openapi.json`.

    Compared without `description` texts: the schemas of openai's types take theirs from the installed
    openai package's docstrings, which change between its releases (a fresh install differed in one URL);
    paths, schemas, fields and types must match exactly."""
    from art.hub.api import openapi_document

    def structure(node: Any) -> Any:
        if isinstance(node, dict):
            return {k: structure(v) for k, v in node.items() if k != "description"}
        return [structure(v) for v in node] if isinstance(node, list) else node

    app_, _ = build_app(ServeConfig(path=tmp_path), api_key=None)
    generated = openapi_document(app_.state.art_api)
    documented = json.loads((DOCS / "remote-openapi.json").read_text())
    assert structure(documented) == structure(json.loads(json.dumps(generated)))
    paths = generated["paths"]
    assert {"/v1/art/models", "/v1/art/models/{project}/{name}/training-jobs", "/v1/art/training-jobs/{job_id}/events",
            "/v1/art/training-jobs/{job_id}/events/stream", "/v1/art/models/{project}/{name}/checkpoints/{step}"} <= set(paths)  # fmt: skip
    body = paths["/v1/art/models/{project}/{name}/training-jobs"]["post"]["requestBody"]
    assert body["content"]["application/json"]["schema"]["$ref"] == "#/components/schemas/TrainingJobCreate"
    assert "TrajectoryGroup" in generated["components"]["schemas"]
