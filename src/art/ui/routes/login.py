"""`art ui` behind a key (when `art serve` mounts it with its own): the guard (`art.common.api_key`'s, the
one every server of ours uses) and `/login`, whose form takes the key once and sets a cookie (a browser page
cannot send the `Authorization` header itself)."""

from __future__ import annotations

from urllib.parse import parse_qs

from fastapi import APIRouter, FastAPI, Request
from fastapi.responses import RedirectResponse, Response
from starlette.types import Scope

from art.common.api_key import ApiKey, RequireApiKey
from art.ui import pages
from art.ui.routes.shared import base, page

COOKIE = "art_ui_key"
OPEN_PATHS = ("/login", "/static/ui.css")
"""What the login page needs before the key is given."""

router = APIRouter()


def guard(app: FastAPI, key: ApiKey) -> None:
    """Every route of `app` needs `key` (its header, or the cookie `/login` sets), but `OPEN_PATHS`."""
    app.state.api_key = key
    app.add_middleware(
        RequireApiKey, key=key, refuse=_login_needed, exempt=lambda path: path in OPEN_PATHS, cookie=COOKIE
    )
    app.include_router(router)


def _login_needed(scope: Scope) -> Response:
    root = str(scope.get("root_path", "")).rstrip("/")
    return page(login_form(root, ""), 401)


@router.post("/login", response_model=None)
async def login(request: Request) -> Response:
    """The key typed into the form: a redirect to all models with the cookie set, or the form again (401)."""
    key: ApiKey = request.app.state.api_key
    form = parse_qs((await request.body()).decode("utf-8", "replace"))
    if not key.typed_ok((form.get("key") or [""])[0]):
        return page(login_form(base(request), "That is not this server's key."), 401)
    response = RedirectResponse(f"{base(request)}/", status_code=303)
    response.set_cookie(COOKIE, key.cookie_value, httponly=True, samesite="strict", path=base(request) or "/")
    return response


def login_form(base: str, error: str) -> str:
    """The page asking for `art serve`'s key, with `error` above the form when there is one."""
    note = f'<p class="problems">{pages.e(error)}</p>' if error else ""
    form = (
        f"{note}This page is served by <code>art serve</code> and needs its key (the file named when it started, "
        f'by default <code>.art/.serve/api_key</code>).<form method="post" action="{pages.e(base)}/login">'
        '<input type="password" name="key" placeholder="API key" autocomplete="current-password"> '
        '<button type="submit">Open</button></form>'
    )
    return pages.message_page(base, "API key needed", form, [("art ui", "")])
