"""A server's API key and the one guard every server of ours puts in front of its routes.

`ApiKey` holds the key and makes the checks (constant-time): an `Authorization: Bearer <key>` header (exactly
one: with two, proxies and frameworks disagree on which one counts), the cookie a browser page gets after
the key was typed into a form (never the key itself: a hash of it), and a typed key. `RequireApiKey` is the
ASGI middleware over them that the OpenAI-compatible server, `art serve` and `art ui` all use; each says
how it refuses (an OpenAI-shaped JSON error, or a login page) and which paths are not its to guard.

Plain ASGI rather than `@app.middleware("http")`: Starlette's `BaseHTTPMiddleware` passes every body chunk
of a streamed response through an extra memory stream and task switch, per token.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Awaitable, Callable
from http.cookies import SimpleCookie

from starlette.types import ASGIApp, Receive, Scope, Send

Refusal = Callable[[Scope], Callable[[Scope, Receive, Send], Awaitable[None]]]
"""Given the refused request's scope, the ASGI response that answers it (401)."""


class ApiKey:
    """One server's key and the checks made with it.

    Example:
        >>> key = ApiKey("s3cret")
        >>> key.header_ok([b"Bearer s3cret"]), key.header_ok([b"Bearer s3cret", b"Bearer s3cret"])
        (True, False)
        >>> key.typed_ok(" s3cret "), key.cookie_ok(key.cookie_value), key.cookie_ok("s3cret")
        (True, True, False)
    """

    def __init__(self, key: str) -> None:
        self._key = key.encode()
        self._header = f"Bearer {key}".encode()
        self.cookie_value = hashlib.sha256(f"art-ui:{key}".encode()).hexdigest()
        """What a browser's cookie holds once the key was typed in (never the key itself)."""

    def header_ok(self, values: list[bytes]) -> bool:
        """Whether the request's `Authorization` header values are exactly one, `Bearer <key>`."""
        return len(values) == 1 and hmac.compare_digest(values[0], self._header)

    def cookie_ok(self, cookie: str) -> bool:
        """Whether a cookie's value is the one `cookie_value` set."""
        return hmac.compare_digest(cookie.encode(), self.cookie_value.encode())

    def typed_ok(self, given: str) -> bool:
        """Whether a key typed into a form (surrounding blanks ignored) is this one."""
        return hmac.compare_digest(given.strip().encode(), self._key)


class RequireApiKey:
    """ASGI middleware: an HTTP request passes with the key's header (or, with `cookie`, that cookie set to
    `key.cookie_value`), or when `exempt(path)` says the path is not this guard's; else `refuse` answers it.

    `path` is the request's path below the app's mount point (`root_path` removed)."""

    def __init__(
        self,
        app: ASGIApp,
        *,
        key: ApiKey,
        refuse: Refusal,
        exempt: Callable[[str], bool] = lambda path: False,
        cookie: str | None = None,
    ) -> None:
        self.app, self.key, self.refuse, self.exempt, self.cookie = app, key, refuse, exempt, cookie

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and not self._passes(scope):
            await self.refuse(scope)(scope, receive, send)
            return
        await self.app(scope, receive, send)

    def _passes(self, scope: Scope) -> bool:
        path, root = str(scope.get("path", "")), str(scope.get("root_path", ""))
        if root and path.startswith(root):
            path = path[len(root) :]
        if self.exempt(path):
            return True
        headers: list[tuple[bytes, bytes]] = scope["headers"]
        if self.key.header_ok([v for k, v in headers if k == b"authorization"]):
            return True
        if self.cookie is None:
            return False
        jar: SimpleCookie = SimpleCookie()
        for k, v in headers:
            if k == b"cookie":
                jar.load(v.decode("latin-1"))
        morsel = jar.get(self.cookie)
        return morsel is not None and self.key.cookie_ok(morsel.value)
