"""`@log_http_errors`: an async function's `httpx.HTTPStatusError` re-raised with the status, the URL and
the server's `detail` in the message (the reference's helper), so a failed call explains itself."""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable
from typing import ParamSpec, TypeVar

import httpx

P = ParamSpec("P")
R = TypeVar("R")


class HTTPError(Exception):
    """An HTTP error status, with the server's explanation."""


def log_http_errors(func: Callable[P, Awaitable[R]]) -> Callable[P, Awaitable[R]]:
    """Decorate an async function; its HTTP status errors become `HTTPError("[HTTP 404] url detail")`.

    Example:
        @log_http_errors
        async def fetch(client: httpx.AsyncClient, url: str) -> httpx.Response: ...
    """

    @functools.wraps(func)
    async def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return await func(*args, **kwargs)
        except httpx.HTTPStatusError as e:
            try:
                body = e.response.json()
            except ValueError:
                raise e from None
            detail = body.get("detail") if isinstance(body, dict) else None
            raise HTTPError(f"[HTTP {e.response.status_code}] {e.request.url} {detail}") from e

    return wrapper
