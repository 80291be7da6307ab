"""What every route of the OpenAI-compatible front uses: the app's `Front` (its engines, body limit and
preparation thread) as a dependency, reading a request's JSON body, and answering a prepared request.

`attach` keeps the `Front` in the app's state (`art.openai_server.http.create_app` calls it); a route takes
`front: AppFront` and FastAPI hands it the app's, as `art.hub.routes.shared` does for the hub. A client that
leaves is `ClientGone`, which the app answers by logging one line (`http.create_app` registers that).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Annotated, Any, TypeVar

from fastapi import Depends, FastAPI, Request
from fastapi.responses import JSONResponse, Response, StreamingResponse
from starlette.requests import ClientDisconnect

from art.openai_server.engine_router import EngineRouter
from art.openai_server.errors import OpenAIError
from art.openai_server.generation import Completions, Prepared
from art.openai_server.protocol import decode_json_body

T = TypeVar("T")


class ClientGone(Exception):
    """The client went away `when` (before its body was read, or before its response was ready)."""

    def __init__(self, when: str = "before its request body was read") -> None:
        super().__init__(when)
        self.when = when


@dataclass
class Front:
    """What the routes of one app serve: `router` (its engines by model name), the largest request body
    (`max_body_bytes`), and the one thread that prepares requests (`prepare_pool`).

    Parsing, validating (grammars compile here) and rendering a request run on that thread, never on the
    event loop: a large prompt or grammar delays that request alone (`/health` and streams go on). One
    thread: the tokenizer is never used by two preparations at once, and the order of arrival is kept."""

    router: EngineRouter
    max_body_bytes: int
    prepare_pool: ThreadPoolExecutor

    async def off_loop(self, fn: Callable[..., T], *args: Any) -> T:
        """`fn(*args)` on the preparation thread."""
        return await asyncio.get_running_loop().run_in_executor(
            self.prepare_pool, functools.partial(fn, *args)
        )


def attach(app: FastAPI, router: EngineRouter, *, max_body_bytes: int) -> Front:
    """Make a `Front` over `router` the one the routes of `app` get (`app.state.front`); also kept as
    `app.state.router` and `app.state.prepare_pool`."""
    pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="art-prepare")
    front = app.state.front = Front(router, max_body_bytes, pool)
    app.state.router = router
    app.state.prepare_pool = pool
    return front


async def front_of(request: Request) -> Front:
    """The `Front` of the app serving `request` (see `attach`); async, so FastAPI calls it on the loop."""
    front: Front = request.app.state.front
    return front


AppFront = Annotated[Front, Depends(front_of)]
"""A route's parameter of this type gets the app's `Front`."""


async def read_body(request: Request, limit: int) -> bytes:
    """The request body, refusing (413) one over `limit` bytes before reading it all, and (415) a
    compressed one; raises `ClientGone` if the client leaves first."""
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
        raise ClientGone from None
    return b"".join(chunks)


INLINE_DECODE_BYTES = 64 * 1024
"""Bodies up to this size are decoded on the event loop (tens of microseconds); larger ones on the
preparation thread. The hop to that thread cost ~0.3 ms a request, a tenth of what our server adds in front
of vLLM (`benchmarks/bench_engines.py`, the hop rows)."""


async def json_body(request: Request, front: AppFront) -> Any:
    """The request's JSON body (a large one decoded on the preparation thread, see `INLINE_DECODE_BYTES`),
    its `model` resolved to a served name (`EngineRouter.resolve_body`)."""
    raw = await read_body(request, front.max_body_bytes)
    if len(raw) <= INLINE_DECODE_BYTES:
        body = decode_json_body(raw)
    else:
        body = await front.off_loop(decode_json_body, raw)
    return front.router.resolve_body(body)


JsonBody = Annotated[Any, Depends(json_body)]
"""A route's parameter of this type gets the request's JSON body (see `json_body`)."""


async def respond(request: Request, front: Front, handler: Completions, prepared: Prepared) -> Response:
    """Run a prepared request and answer it: a stream of server-sent events, or one JSON body (encoded on
    the preparation thread: a large response does not hold the loop either)."""
    if prepared.request.stream:  # Starlette stops the stream (and so the generation) if the client goes
        return StreamingResponse(handler.stream(prepared), media_type="text/event-stream")
    try:
        result = await _unless_disconnected(request, handler.complete(prepared))
    except ClientGone:  # nobody is waiting: its sequences were aborted, the engine is free
        raise ClientGone("before its response was ready (generation stopped)") from None
    return await front.off_loop(JSONResponse, result)


async def _unless_disconnected(request: Request, work: Awaitable[T]) -> T:
    """`await work`, unless the client disconnects first: then `work` is cancelled (an engine request
    aborts its sequences) and `ClientGone` is raised. Call it once the body has been read: what the
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
        raise ClientGone
    return task.result()
