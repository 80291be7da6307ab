"""The one key guard (`art.common.api_key`) that the OpenAI-compatible server, `art serve` and `art ui` use."""

from __future__ import annotations

from fastapi import FastAPI
from fastapi.responses import PlainTextResponse
from fastapi.testclient import TestClient
from starlette.types import Scope

from art.common.api_key import ApiKey, RequireApiKey


def _app(*, cookie: str | None = None, root_path: str = "") -> TestClient:
    app = FastAPI()

    @app.get("/open")
    @app.get("/data")
    def data() -> PlainTextResponse:
        return PlainTextResponse("data")

    def refuse(_: Scope) -> PlainTextResponse:
        return PlainTextResponse("refused", status_code=401)

    app.add_middleware(
        RequireApiKey, key=ApiKey("k1"), refuse=refuse, exempt=lambda p: p == "/open", cookie=cookie
    )
    return TestClient(app, root_path=root_path)


def test_the_header_passes_once_and_only_with_the_key() -> None:
    client = _app()
    assert client.get("/data", headers={"Authorization": "Bearer k1"}).text == "data"
    assert client.get("/data", headers={"Authorization": "Bearer k2"}).status_code == 401
    assert client.get("/data").text == "refused"
    two = [("authorization", "Bearer k1"), ("authorization", "Bearer k1")]
    assert client.get("/data", headers=two).status_code == 401  # which one counts is ambiguous: refused
    assert client.get("/open").text == "data"  # not the guard's


def test_the_cookie_passes_only_where_the_guard_takes_cookies_and_holds_no_key() -> None:
    key = ApiKey("k1")
    assert "k1" not in key.cookie_value
    with_cookies = _app(cookie="c")
    with_cookies.cookies.set("c", key.cookie_value)
    assert with_cookies.get("/data").text == "data"
    with_cookies.cookies.set("c", "k1")  # the key itself is not the cookie
    assert with_cookies.get("/data").status_code == 401
    without = _app()
    without.cookies.set("c", key.cookie_value)
    assert without.get("/data").status_code == 401


def test_exempt_paths_are_read_below_the_mount_point() -> None:
    client = _app(root_path="/ui")
    assert client.get("/ui/open").text == "data"
    assert client.get("/ui/data").status_code == 401
