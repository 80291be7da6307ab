"""The OpenAI-compatible HTTP server: FastAPI routes over an `Engine`, and a thread that runs uvicorn.

Routes: `GET /health`, `GET /v1/models`, `POST /v1/chat/completions` (see `chat_completions`),
`POST /v1/completions` (see `completions`). More routers (e.g. the training API of `art serve`, `art.hub.api`) can be added to the app `create_app` returns.
One app serves one engine, or several through an `EngineRouter` (`art serve`: every model on one port): a
request goes to the engine that serves its `model` name.

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

import asyncio
import contextlib
import functools
import logging
import socket
import threading
import time
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, TypeVar

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response, StreamingResponse
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.requests import ClientDisconnect
from starlette.types import ASGIApp, Receive, Scope, Send

from art.common.api_key import ApiKey, RequireApiKey
from art.engines.base import ChatForwardingEngine, Engine, EngineError, ModelNotFoundError
from art.openai_server.chat_completions import ChatCompletions
from art.openai_server.completions import CompletionRequest, TextCompletions
from art.openai_server.errors import OpenAIError, bad_request
from art.openai_server.generation import (
    DEFAULT_STREAM_CHUNK_RATE,
    DEFAULT_STREAM_INTERVAL,
    Completions,
    Prepared,
    engine_error,
)
from art.openai_server.protocol import ChatCompletionRequest, decode_json_body

log = logging.getLogger(__name__)
T = TypeVar("T")

DEFAULT_MAX_BODY_BYTES = 32 * 2**20
"""Largest request body accepted (413 beyond it)."""


class _Disconnected(Exception):
    """The client went away before its request body was read."""


async def read_body(request: Request, limit: int) -> bytes:
    """The request body, refusing (413) one over `limit` bytes before reading it all, and (415) a
    compressed one; raises `_Disconnected` if the client leaves first."""
    encoding = request.headers.get("content-encoding", "identity").strip().lower()
    if encoding not in ("", "identity"):
        raise OpenAIError(
            415,
            f"Content-Encoding {encoding!r} is not supported: send the JSON body uncompressed.",
            code="unsupported_encoding",
        )
    declared = request.headers.get("content-length", "")
    too_large = OpenAIError(
        413,
        f"The request body is larger than {limit} bytes, the most this server accepts (max_body_bytes).",
        code="request_too_large",
    )
    if declared.isdigit() and int(declared) > limit:
        raise too_large
    chunks, size = [], 0
    try:
        async for chunk in request.stream():
            size += len(chunk)
            if size > limit:
                raise too_large
            chunks.append(chunk)
    except ClientDisconnect:
        raise _Disconnected from None
    return b"".join(chunks)


def error_response(error: OpenAIError) -> JSONResponse:
    """The JSON response for an OpenAIError."""
    headers = {"WWW-Authenticate": "Bearer"} if error.status == 401 else None
    return JSONResponse(error.body(), status_code=error.status, headers=headers)


@dataclass
class _Route:
    """One engine behind the app, with its handlers (its tokenizer and chat template render its prompts)."""

    engine: Engine
    chat: ChatCompletions
    completions: TextCompletions


class EngineRouter:
    """Served model names -> the engine serving them: one OpenAI-compatible app in front of several engines.

    Each engine gets its own `ChatCompletions` and `TextCompletions`. A name is looked up in every engine's
    `model_names()` at each request, so adapters an engine loads or unloads are routed at once. Engines
    that serve the same name (e.g. two models over one base model): the first added wins. A request for a
    name no engine serves is a 404 (`model_not_found`) listing the served names, then `not_found_hint`
    (what to do; `art serve` says how to add a model). Example:
        router = EngineRouter(); router.add(engine_a); router.add(engine_b)
        app = create_app(router, api_key="...")
    """

    def __init__(
        self,
        *,
        stream_interval: float = DEFAULT_STREAM_INTERVAL,
        stream_chunk_rate: float | None = DEFAULT_STREAM_CHUNK_RATE,
        max_prompt_chars: int | None = None,
        not_found_hint: str = "",
    ) -> None:
        self.stream_interval = stream_interval
        self.not_found_hint = not_found_hint
        self.stream_chunk_rate = stream_chunk_rate
        self.max_prompt_chars = max_prompt_chars
        self._routes: list[_Route] = []
        self._aliases: list[Callable[[str], str | None]] = []

    def add_alias(self, resolve: Callable[[str], str | None]) -> None:
        """Also accept other spellings of served names: `resolve(name)` returns the served name a request's
        `model` means, or None (e.g. `art serve` maps the reference's serverless names,
        `wandb-artifact:///entity/project/name:step3`, to `name@3`)."""
        self._aliases.append(resolve)

    def resolve_name(self, model: str) -> str:
        """The served name a request's `model` means: itself, or what an alias resolver says."""
        for resolve in self._aliases:
            served = resolve(model)
            if served is not None:
                return served
        return model

    def resolve_body(self, body: Any) -> Any:
        """A request body with its `model` resolved (`resolve_name`); anything else as it is."""
        if isinstance(body, dict) and isinstance(body.get("model"), str) and self._aliases:
            body = {**body, "model": self.resolve_name(body["model"])}
        return body

    def add(self, engine: Engine) -> ChatCompletions:
        """Route `engine`'s names to it; returns its chat-completions handler."""
        pacing: dict[str, Any] = {
            "stream_interval": self.stream_interval,
            "stream_chunk_rate": self.stream_chunk_rate,
            "max_prompt_chars": self.max_prompt_chars,
        }
        route = _Route(engine, ChatCompletions(engine, **pacing), TextCompletions(engine, **pacing))
        self._routes.append(route)
        return route.chat

    def remove(self, engine: Engine) -> None:
        """Stop routing to `engine` (requests already running finish)."""
        self._routes = [r for r in self._routes if r.engine is not engine]

    def clear(self) -> None:
        """Stop routing to every engine (each name then answers 404)."""
        self._routes = []

    def _route(self, model: str) -> _Route:
        for route in self._routes:
            if model in route.engine.model_names():
                return route
        raise self.not_found(model)

    def not_found(self, model: str, shown: int = 20) -> OpenAIError:
        """The 404 for a `model` no engine serves: the served names (the first `shown`), then the hint."""
        error = engine_error(ModelNotFoundError(model))
        served = self.model_names()
        listed = ", ".join(served[:shown]) + (
            f" and {len(served) - shown} more" if len(served) > shown else ""
        )
        message = f"{error.message.rstrip('.')} on this server. Served models: {listed or 'none'}."
        error.message = f"{message} {self.not_found_hint}".strip()
        return error

    def chat_for(self, model: str) -> ChatCompletions:
        """The chat handler of the engine serving `model`; an OpenAI 404 (`model_not_found`) if none does."""
        return self._route(model).chat

    def completions_for(self, model: str) -> TextCompletions:
        """The `/v1/completions` handler of the engine serving `model`; a 404 if none does."""
        return self._route(model).completions

    def forwarding_engine_for(self, body: Any) -> ChatForwardingEngine | None:
        """The engine a chat request body goes to whole (e.g. vLLM's), if its model is served by one; None
        otherwise, also for a body too malformed to name a model (our own validation then says why)."""
        model = body.get("model") if isinstance(body, dict) else None
        if not isinstance(model, str):
            return None
        for route in self._routes:
            if model in route.engine.model_names():
                return route.engine if isinstance(route.engine, ChatForwardingEngine) else None
        return None

    def model_names(self) -> list[str]:
        """Every name served, once, in the order engines were added."""
        return list(dict.fromkeys(name for r in self._routes for name in r.engine.model_names()))


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
    Routes added to the app later (`art serve`'s training API) are under the same body limit."""
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
    app.state.router = router
    # Parsing, validating (grammars compile here) and rendering a request run on this thread, never on the
    # event loop: a large prompt or grammar delays that request alone (`/health` and streams go on). One
    # thread: the tokenizer is never used by two preparations at once, and the order of arrival is kept.
    pool = app.state.prepare_pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="art-prepare")

    async def off_loop(fn: Callable[..., T], *args: Any) -> T:
        return await asyncio.get_running_loop().run_in_executor(pool, functools.partial(fn, *args))

    app.add_middleware(_LimitBody, limit=max_body_bytes)
    if api_key is not None:
        app.add_middleware(
            RequireApiKey,
            key=ApiKey(api_key),
            refuse=_refuse_key,
            exempt=lambda path: any(path == p or path.startswith(p + "/") for p in own_auth_prefixes),
        )

    _answer_errors_in_openai_shape(app)

    @app.get("/health")
    async def health() -> dict[str, str]:
        return {"status": "ok"}

    @app.get("/v1/models")
    async def models() -> dict[str, Any]:
        created = int(time.time())
        return {
            "object": "list",
            "data": [
                {"id": name, "object": "model", "created": created, "owned_by": "art"}
                for name in router.model_names()
            ],
        }

    async def respond(request: Request, handler: Completions, prepared: Prepared) -> Response:
        if prepared.request.stream:  # Starlette stops the stream (and so the generation) if the client goes
            return StreamingResponse(handler.stream(prepared), media_type="text/event-stream")
        try:
            result = await _unless_disconnected(request, handler.complete(prepared))
        except _Disconnected:  # nobody is waiting: its sequences were aborted, the engine is free
            return _gone(request, "before its response was ready (generation stopped)")
        return await off_loop(JSONResponse, result)  # a large response is encoded off the loop too

    async def body_of(request: Request) -> Any:
        return await off_loop(decode_json_body, await read_body(request, max_body_bytes))

    def prepare_chat(body: Any) -> tuple[Completions, Prepared]:
        parsed = ChatCompletionRequest.parse(body)
        chat = router.chat_for(parsed.model)
        return chat, chat.prepare(parsed)

    def prepare_text(body: Any) -> tuple[Completions, Prepared]:
        parsed = CompletionRequest.parse(body)
        text = router.completions_for(parsed.model)
        return text, text.prepare(parsed)

    @app.post("/v1/chat/completions", response_model=None)
    async def chat_completions(request: Request) -> Response:
        try:
            body = router.resolve_body(await body_of(request))
        except _Disconnected:
            return _gone(request)
        forwarding = router.forwarding_engine_for(body)
        if forwarding is not None:  # e.g. vLLM: its own template and tool parser
            return await _forward(forwarding, body)
        return await respond(request, *await off_loop(prepare_chat, body))

    @app.post("/v1/completions", response_model=None)
    async def completions(request: Request) -> Response:
        try:
            body = router.resolve_body(await body_of(request))
        except _Disconnected:
            return _gone(request)
        return await respond(request, *await off_loop(prepare_text, body))

    return app


def _answer_errors_in_openai_shape(app: FastAPI) -> None:
    """Every error `app` answers, ours, FastAPI's (404, 405, 422) and a bug's (500), in OpenAI's shape."""

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


async def _unless_disconnected(request: Request, work: Awaitable[T]) -> T:
    """`await work`, unless the client disconnects first: then `work` is cancelled (an engine request
    aborts its sequences) and `_Disconnected` is raised. Call it once the body has been read: what the
    client sends after it is only its disconnect."""

    async def disconnected() -> None:
        while (await request.receive())["type"] != "http.disconnect":
            pass

    task = asyncio.ensure_future(work)
    watch = asyncio.ensure_future(disconnected())
    try:
        done, _ = await asyncio.wait({task, watch}, return_when=asyncio.FIRST_COMPLETED)
    except BaseException:  # cancelled (e.g. the server is stopping): stop both
        watch.cancel()
        task.cancel()
        raise
    watch.cancel()
    if task not in done:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        raise _Disconnected
    return task.result()


async def _forward(engine: ChatForwardingEngine, body: Any) -> Response:
    if not isinstance(body, dict):
        raise bad_request("The request body must be a JSON object.")
    try:
        answer = await engine.forward_chat(body)
    except EngineError as exc:
        raise engine_error(exc) from None
    if answer.stream is not None:
        return StreamingResponse(answer.stream, media_type="text/event-stream")
    return JSONResponse(answer.body, status_code=answer.status)


def _gone(request: Request, when: str = "before its request body was read") -> Response:
    """Log a client that left (one line), and answer no one."""
    client = f"{request.client.host}:{request.client.port}" if request.client else "a client"
    log.info("%s disconnected %s (%s %s)", client, when, request.method, request.url.path)
    return Response(status_code=400)


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
