"""The OpenAI-compatible HTTP server: FastAPI routes over an `Engine`, and a thread that runs uvicorn.

Routes (one module each in `art.openai_server.routes`): `GET /health`, `GET /v1/models`,
`POST /v1/chat/completions` (see `chat_completions`), `POST /v1/completions` (see `completions`). More
routers (e.g. the training API of `art serve`, `art.hub.api`) can be added to the app `create_app` returns.
One app serves one engine, or several through an `EngineRouter` (`engine_router`; `art serve`: every model
on one port): a request goes to the engine that serves its `model` name.

Auth: with an `api_key`, every route (including /health and unknown paths) requires exactly one
`Authorization: Bearer <api_key>` header; a missing or wrong key, or two headers, gets 401.
Errors always use OpenAI's shape {"error": {"message", "type", "param", "code"}}: 400 for malformed JSON
and invalid requests (validation happens before anything reaches the engine, so a bad request never
disturbs the ones in flight; see `openai_protocol`), 401, 404 for unknown models and paths, 405, 413 for a
body over `max_body_bytes` (default 32 MiB; on every route, before it runs) or a prompt over
`max_prompt_chars`, 415 for a compressed body, 500/503 for engine failures only. Error bodies never carry a
backtrace or a source path (`errors.public_text`). A client that disconnects before its body is read is
logged as one line (no traceback); one that disconnects before its response is ready cancels the request
(its sequences stop generating).

No request holds the event loop: decoding, validating (grammar compilation included), rendering and
tokenizing a request, and encoding a non-streamed response, run on one worker thread (`prepare_pool`).

`ServerThread` runs uvicorn on its own event loop in a daemon thread, so it works the same from sync code,
from a notebook, or next to the trainer's event loop. It binds 127.0.0.1 on a free port by default and
`start()` returns the base URL (".../v1") once the server accepts connections. The engine's forward passes
run in the engine's own worker thread, never on this event loop.
"""

from __future__ import annotations

import logging
import socket
import threading
import time
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.types import ASGIApp, Receive, Scope, Send

from art.common.api_key import ApiKey, RequireApiKey
from art.engines.base import Engine
from art.openai_server.engine_router import EngineRouter
from art.openai_server.errors import OpenAIError, bad_request
from art.openai_server.generation import DEFAULT_STREAM_CHUNK_RATE, DEFAULT_STREAM_INTERVAL
from art.openai_server.routes import ROUTERS
from art.openai_server.routes.shared import ClientGone, attach

__all__ = [
    "DEFAULT_MAX_BODY_BYTES",
    "EngineRouter",
    "ServerThread",
    "bind_socket",
    "create_app",
    "error_response",
    "http_url",
]

log = logging.getLogger(__name__)

DEFAULT_MAX_BODY_BYTES = 32 * 2**20
"""Largest request body accepted (413 beyond it)."""


def error_response(error: OpenAIError) -> JSONResponse:
    """The JSON response for an OpenAIError."""
    headers = {"WWW-Authenticate": "Bearer"} if error.status == 401 else None
    return JSONResponse(error.body(), status_code=error.status, headers=headers)


def create_app(
    engine: Engine | EngineRouter,
    *,
    api_key: str | None,
    stream_interval: float = DEFAULT_STREAM_INTERVAL,
    stream_chunk_rate: float | None = DEFAULT_STREAM_CHUNK_RATE,
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
    max_prompt_chars: int | None = None,
    own_auth_prefixes: tuple[str, ...] = (),
) -> FastAPI:
    """The FastAPI app serving `engine` (or every engine of an `EngineRouter`); `api_key` None disables
    authentication. Paths under `own_auth_prefixes` (e.g. `/ui`, mounted by `art serve`) check the key
    themselves (a browser page cannot send the header; it logs in with a cookie).

    `stream_interval`: seconds a streamed choice's tokens may wait to go out in one chunk (0: a chunk per
    token); `stream_chunk_rate`: token chunks per second over all open streams, at most, which stretches
    that interval under many concurrent streams (None: no limit). See `art.openai_server.chat_completions`.
    `max_body_bytes`: the largest request body on every route (413 beyond); `max_prompt_chars`: the
    largest prompt (413 beyond; None: what the context window could hold, see `Completions.prompt_limit`).
    Routes added to the app later (`art serve`'s training API) are under the same body limit. The routes
    themselves are modules of `art.openai_server.routes`."""
    app = FastAPI(title="ART inference", docs_url=None, redoc_url=None, openapi_url=None)
    if isinstance(engine, EngineRouter):
        router = engine
    else:
        router = EngineRouter(
            stream_interval=stream_interval,
            stream_chunk_rate=stream_chunk_rate,
            max_prompt_chars=max_prompt_chars,
        )
        app.state.engine = engine
        app.state.chat = router.add(engine)
    attach(app, router, max_body_bytes=max_body_bytes)
    app.add_middleware(_LimitBody, limit=max_body_bytes)
    if api_key is not None:
        app.add_middleware(
            RequireApiKey,
            key=ApiKey(api_key),
            refuse=_refuse_key,
            exempt=lambda path: any(path == p or path.startswith(p + "/") for p in own_auth_prefixes),
        )
    _answer_errors_in_openai_shape(app)
    for routes in ROUTERS:
        app.include_router(routes)
    return app


def _answer_errors_in_openai_shape(app: FastAPI) -> None:
    """Every error `app` answers, ours, FastAPI's (404, 405, 422) and a bug's (500), in OpenAI's shape."""

    @app.exception_handler(ClientGone)
    async def client_gone(request: Request, exc: ClientGone) -> Response:  # one line; nobody to answer
        client = f"{request.client.host}:{request.client.port}" if request.client else "a client"
        log.info("%s disconnected %s (%s %s)", client, exc.when, request.method, request.url.path)
        return Response(status_code=400)

    @app.exception_handler(OpenAIError)
    async def openai_error(_: Request, exc: OpenAIError) -> JSONResponse:
        return error_response(exc)

    @app.exception_handler(StarletteHTTPException)
    async def http_error(_: Request, exc: StarletteHTTPException) -> JSONResponse:
        kind = "not_found_error" if exc.status_code == 404 else "invalid_request_error"
        return error_response(OpenAIError(exc.status_code, str(exc.detail), type=kind))

    @app.exception_handler(RequestValidationError)
    async def validation_error(_: Request, exc: RequestValidationError) -> JSONResponse:
        return error_response(bad_request(str(exc.errors()[:1])))

    @app.exception_handler(Exception)
    async def unexpected_error(
        request: Request, exc: Exception
    ) -> JSONResponse:  # a bug: still OpenAI's shape
        log.exception("unexpected error serving %s %s", request.method, request.url.path)
        return error_response(OpenAIError(500, f"internal error: {type(exc).__name__}", type="server_error"))


class _LimitBody:
    """ASGI middleware: 413 for a request whose declared body is over `limit` bytes, on every route (those
    that read a body also count what arrives, `read_body`); answered before the route runs."""

    def __init__(self, app: ASGIApp, limit: int) -> None:
        self.app = app
        self.limit = limit

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            declared = next((v for k, v in scope["headers"] if k == b"content-length"), b"")
            if declared.isdigit() and int(declared) > self.limit:
                error = OpenAIError(
                    413,
                    f"The request body is {int(declared)} bytes; this server accepts at most {self.limit} "
                    "(max_body_bytes).",
                    type="request_too_large",
                    code="request_too_large",
                )
                await error_response(error)(scope, receive, send)
                return
        await self.app(scope, receive, send)


def _refuse_key(_: Scope) -> JSONResponse:
    return error_response(
        OpenAIError(
            401, "Incorrect or missing API key.", type="invalid_request_error", code="invalid_api_key"
        )
    )


def bind_socket(host: str, port: int) -> socket.socket:
    """A TCP socket bound to `host:port` (0: a free port), not yet listening; IPv6 when `host` has a ':'.

    TCP_NODELAY is set here, on the listening socket, so that every connection it accepts inherits it:
    uvicorn serving a socket it is handed writes a response's head and body as two segments, and with
    Nagle's algorithm on, the second waits for the client's delayed ACK (40 ms on Linux). That wait was
    the +47 ms our server added to each request in front of vLLM (`benchmarks/bench_engines.py`)."""
    sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    try:
        sock.bind((host, port))
    except OSError:
        sock.close()
        raise
    return sock


def http_url(host: str, port: int) -> str:
    """`http://host:port`, with an IPv6 host in brackets."""
    return f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"


class ServerThread:
    """Runs uvicorn serving `app` in a daemon thread with its own event loop."""

    def __init__(self, app: FastAPI, *, log_level: str = "warning") -> None:
        self.app = app
        self.log_level = log_level
        self.base_url: str | None = None
        self._server: Any = None
        self._thread: threading.Thread | None = None

    def start(self, host: str = "127.0.0.1", port: int = 0, *, timeout: float = 30.0) -> str:
        """Bind `host:port` (0: a free port), serve, and return the base URL "http://host:port/v1"."""
        import uvicorn

        if self._thread is not None:
            raise RuntimeError("server already started")
        sock = bind_socket(host, port)
        bound_port = sock.getsockname()[1]
        config = uvicorn.Config(
            self.app,
            log_level=self.log_level,
            access_log=False,
            timeout_keep_alive=30,
            timeout_graceful_shutdown=5,
        )
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(
            target=self._server.run, kwargs={"sockets": [sock]}, name="art-server", daemon=True
        )
        self._thread.start()
        deadline = time.monotonic() + timeout
        while not self._server.started:
            if not self._thread.is_alive():
                raise RuntimeError("the server thread exited during startup")
            if time.monotonic() > deadline:
                raise TimeoutError(f"the server did not start within {timeout} s")
            time.sleep(0.01)
        self.base_url = f"{http_url(host, bound_port)}/v1"
        return self.base_url

    def stop(self, timeout: float = 10.0) -> None:
        """Ask uvicorn to exit and wait for the thread."""
        if self._server is not None:
            self._server.should_exit = True
        if self._thread is not None:
            self._thread.join(timeout)
        self._thread = None
        self._server = None

    def close(self, timeout: float = 10.0) -> None:
        """Stop, then let go of the engines the app routes to, so their memory can be freed.

        FastAPI keeps every endpoint function in process-wide caches (`fastapi.dependencies.models`), and
        our endpoints reach the engines through the app's `EngineRouter`: without this, a closed engine's
        weights and KV cache would stay in memory for the life of the process."""
        self.stop(timeout)
        router = getattr(self.app.state, "router", None)
        if isinstance(router, EngineRouter):
            router.clear()
        for key in ("engine", "chat"):
            if hasattr(self.app.state, key):
                delattr(self.app.state, key)
        pool = getattr(self.app.state, "prepare_pool", None)
        if pool is not None:
            pool.shutdown(wait=False)
