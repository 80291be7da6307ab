"""What every Tinker route uses: the server's Tinker state, the key check, and how refusals are answered.

The SDK sends its key as `X-API-Key` (no `Bearer`) and refuses, before sending anything, a key that does
not start with `tml-`: `art serve` makes its keys that way, and also takes `tml-` + an older key of its
own. Refusals are JSON in OpenAI's error shape like the server's other routes (never an empty body: the
SDK takes an empty 400 for a proxy's and retries it): 401 wrong key, 404 what a request names and this
server lacks (`NotFound`), 400 what it cannot do as asked (`BadInput`).
"""

from __future__ import annotations

import asyncio
import functools
import hmac
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Annotated, Any

from fastapi import Body, Depends, FastAPI, HTTPException, Request
from fastapi.responses import JSONResponse

from art.hub.models import ServiceHub
from art.hub.tinker.futures import Futures
from art.hub.tinker.ids import BadInput, NotFound
from art.hub.tinker.sampling import TinkerSampling
from art.hub.tinker.training import TinkerTraining

KEY_PREFIX = "tml-"
MAX_REPLIES = 4096
"""Work answers remembered by idempotency key (the newest)."""


@dataclass
class TinkerState:
    """The Tinker API's state in one app: futures, training models and samplers, and the key."""

    hub: ServiceHub
    api_key: str | None
    aliases: dict[str, str] = field(default_factory=dict)  # a client's base model name -> what to load
    futures: Futures = field(default_factory=Futures)
    replies: OrderedDict[str, asyncio.Future[dict[str, Any]]] = field(default_factory=OrderedDict)
    training: TinkerTraining = field(init=False)
    sampling: TinkerSampling = field(init=False)

    def __post_init__(self) -> None:
        self.training = TinkerTraining(self.hub, self.futures, self.aliases)
        self.sampling = TinkerSampling(self.hub, self.training, self.futures)

    async def once(self, request: Request, answer: Callable[[], Awaitable[dict[str, Any]]]) -> dict[str, Any]:
        """`answer()`, once per `X-Idempotency-Key`: the SDK resends a work POST with the same key when the
        connection dropped, and a second forward_backward would accumulate its gradient twice. A repeat
        gets the first answer (waiting for it if it is still being made); a refused request is forgotten."""
        key = request.headers.get("x-idempotency-key")
        if key is None:
            return await answer()
        known = self.replies.get(key)
        if known is not None:
            return await asyncio.shield(known)
        pending: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self.replies[key] = pending
        while len(self.replies) > MAX_REPLIES:
            self.replies.popitem(last=False)
        try:
            reply = await answer()
        except BaseException:
            self.replies.pop(key, None)
            pending.cancel()
            raise
        pending.set_result(reply)
        return reply

    def key_ok(self, given: str | None) -> bool:
        """The server's key, or `tml-` + it (keys made before keys started with `tml-`)."""
        if self.api_key is None:
            return True
        if given is None:
            return False
        accepted = [self.api_key] if self.api_key.startswith(KEY_PREFIX) else [KEY_PREFIX + self.api_key]
        return any(hmac.compare_digest(given.encode(), k.encode()) for k in accepted)


def attach_tinker(
    app: FastAPI, hub: ServiceHub, api_key: str | None, *, aliases: dict[str, str] | None = None
) -> TinkerState:
    """Give `app` its Tinker state and the answers to `BadInput` (400) and `NotFound` (404). `aliases`: base
    model names Tinker clients use -> what the server loads for them (`art serve --tinker-model`)."""
    state = app.state.tinker = TinkerState(hub, api_key, dict(aliases or {}))

    @app.exception_handler(BadInput)
    async def bad_input(_: Request, exc: BadInput) -> JSONResponse:
        return refusal(400, str(exc), "invalid_request_error")

    @app.exception_handler(NotFound)
    async def not_found(_: Request, exc: NotFound) -> JSONResponse:
        return refusal(404, str(exc), "not_found_error")

    return state


Route = Callable[..., Awaitable[dict[str, Any]]]


def idempotent(route: Route) -> Route:
    """A work route answered once per `X-Idempotency-Key` (`TinkerState.once`); it takes `request` and
    `tinker` parameters by those names."""

    @functools.wraps(route)
    async def once(*args: Any, **kwargs: Any) -> dict[str, Any]:
        state: TinkerState = kwargs["tinker"]
        return await state.once(kwargs["request"], lambda: route(*args, **kwargs))

    return once


def refusal(status: int, message: str, kind: str) -> JSONResponse:
    return JSONResponse({"error": {"message": message, "type": kind, "param": None, "code": None}}, status)


def tinker_of(request: Request) -> TinkerState:
    """The app's Tinker state, once the request's `X-API-Key` passed (401 otherwise)."""
    state: TinkerState = request.app.state.tinker
    if not state.key_ok(request.headers.get("x-api-key")):
        raise HTTPException(
            401, "wrong or missing API key (X-API-Key): use the key art serve printed, e.g. tml-..."
        )
    return state


JsonBody = Annotated[dict[str, Any], Body()]
"""A route's JSON object body (the SDK's request, read as it comes: unknown fields are ignored)."""

OptionalJsonBody = Annotated[dict[str, Any] | None, Body()]

Tinker = Annotated[TinkerState, Depends(tinker_of)]
"""A route's parameter of this type gets the app's Tinker state (after the key check)."""


def required_text(body: dict[str, Any], key: str) -> str:
    """`body[key]`, a non-empty string (BadInput naming the field otherwise)."""
    value = body.get(key)
    if not isinstance(value, str) or not value:
        raise BadInput(f"{key} is required (a string)")
    return value


def required_int(body: dict[str, Any], key: str) -> int:
    """`body[key]`, an integer (BadInput naming the field otherwise)."""
    value = body.get(key)
    if not isinstance(value, int) or isinstance(value, bool):
        raise BadInput(f"{key} is required (an integer)")
    return value
