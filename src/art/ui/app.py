"""`art ui`'s web app: a read-only FastAPI app over a record folder (`.art/` by default).

Pages (server-rendered HTML, `pages.py`; routes in `art.ui.routes`, one module per concern): `/` the
projects and models; `/m/{project}/{model}` a model's metric charts by step and split, step timings, steps,
checkpoints and the comparison form; `/m/{project}/{model}/{split}/{step}` a step's groups side by side;
`.../{group}/{trajectory}` one trajectory (chat, tokens, judge) with its neighbours;
`/m/{project}/{model}/compare` two steps on the same scenarios. `/api/version` is what the page polls to
refresh itself while a run trains.

Security: the app only reads. `art ui` binds loopback by default and needs no key there; `art serve`
mounts it under `/ui` with its key (`api_key`): a request passes with `Authorization: Bearer <key>` or the
cookie `/ui/login` sets after the key is typed into its form (a browser cannot send the header itself).
"""

from __future__ import annotations

from pathlib import Path

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import HTMLResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from art.common.api_key import ApiKey
from art.ui import pages
from art.ui.record import RecordReader
from art.ui.routes import assets, login, models, steps
from art.ui.routes.models import DEFAULT_CHARTS, TIMING_KEYS
from art.ui.routes.shared import base, page

__all__ = ["DEFAULT_CHARTS", "TIMING_KEYS", "create_app"]


def create_app(root: str | Path, *, api_key: str | None = None) -> FastAPI:
    """The `art ui` app over the record at `root`. With `api_key`, every page needs it (see module)."""
    app = FastAPI(title="art ui", docs_url=None, redoc_url=None, openapi_url=None)
    app.state.reader = RecordReader(root)
    if api_key is not None:
        login.guard(app, ApiKey(api_key))
    app.add_exception_handler(RequestValidationError, _bad_request)
    app.add_exception_handler(StarletteHTTPException, _http_error)
    for routes in (assets, models, steps):
        app.include_router(routes.router)
    return app


async def _bad_request(request: Request, exc: Exception) -> HTMLResponse:
    assert isinstance(exc, RequestValidationError)
    where = ", ".join(
        ".".join(str(p) for p in err.get("loc", ())) + ": " + str(err.get("msg")) for err in exc.errors()[:3]
    )
    return page(pages.message_page(base(request), "Bad request", pages.e(where)), 400)


async def _http_error(request: Request, exc: Exception) -> HTMLResponse:
    assert isinstance(exc, StarletteHTTPException)
    return page(
        pages.message_page(base(request), f"Error {exc.status_code}", pages.e(exc.detail)), exc.status_code
    )
