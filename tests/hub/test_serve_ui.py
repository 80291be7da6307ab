"""`art serve` mounts `art ui` under /ui behind its key: without the key a login form (401), with the bearer
header or the cookie its form sets the pages; the rest of the API still takes only the header."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

pytest.importorskip("torch", reason="needs the `local` extra: pip install -e '.[local]'")

from helpers_servers import UvicornThread

from art.hub.app import ServeConfig, build_app
from art.record.storage import ModelStorage

KEY = "serve-ui-key"


@pytest.fixture
def served(tmp_path: Path) -> Iterator[str]:
    storage = ModelStorage(tmp_path, "proj", "agent")
    storage.append_history(1, {"train/reward": 0.5})
    app, _ = build_app(ServeConfig(path=tmp_path), KEY)
    server = UvicornThread(app, "art serve")
    yield server.start().removesuffix("/v1")
    server.stop()


def test_ui_needs_the_key_and_a_browser_logs_in_with_a_form(served: str) -> None:
    with httpx.Client(base_url=served, timeout=30) as client:
        denied = client.get("/ui/")
        assert denied.status_code == 401 and 'action="/ui/login"' in denied.text and "proj" not in denied.text
        assert client.get("/ui/m/proj/agent").status_code == 401
        assert client.post("/ui/login", content="key=wrong").status_code == 401
        login = client.post(
            "/ui/login", content=f"key={KEY}", headers={"Content-Type": "application/x-www-form-urlencoded"}
        )
        assert login.status_code == 303 and login.headers["location"] == "/ui/"
        assert "art_ui_key" in client.cookies and KEY not in client.cookies["art_ui_key"]
        index = client.get("/ui/")
        assert index.status_code == 200 and 'href="/ui/m/proj/agent"' in index.text
        assert client.get("/ui/m/proj/agent").status_code == 200
        # the cookie opens the pages only, never the training or OpenAI routes
        assert client.get("/v1/models").status_code == 401
    header = {"Authorization": f"Bearer {KEY}"}
    assert httpx.get(served + "/ui/m/proj/agent", headers=header).status_code == 200
    assert httpx.get(served + "/v1/models", headers=header).status_code == 200
