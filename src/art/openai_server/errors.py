"""Errors answered in OpenAI's shape: {"error": {"message", "type", "param", "code"}}.

An error body never shows the server's insides: `public_text` cuts a backtrace (a Rust panic's, a Python
traceback) and replaces source-file paths (a build machine's, this installation's) before it is sent.
"""

from __future__ import annotations

import re
from typing import Any

MAX_MESSAGE_CHARS = 2000
"""Longest error message sent; longer ones are cut (a library may echo a whole grammar back)."""

_BACKTRACE = re.compile(
    r"(stack backtrace:|note: run with `RUST_BACKTRACE|Traceback \(most recent call last\))"
)
_SOURCE_PATH = re.compile(r"(?:[A-Za-z]:)?(?:[/\\][^\s'\"()<>:,;]+)+\.(?:rs|py|pyx|c|cc|cpp|h|hpp)(?::\d+)*")


def public_text(message: str) -> str:
    """`message` fit for a client: no backtrace, no source-file paths, at most `MAX_MESSAGE_CHARS`.

    Example:
        >>> public_text("panicked at /root/.cargo/registry/src/lib.rs:12:5: bad grammar stack backtrace: 0: x")
        'panicked at <source>: bad grammar'
    """
    cut = _BACKTRACE.search(message)
    if cut is not None:
        message = message[: cut.start()]
    message = _SOURCE_PATH.sub("<source>", message).strip()
    if len(message) > MAX_MESSAGE_CHARS:
        message = message[: MAX_MESSAGE_CHARS - 1] + "…"
    return message


class OpenAIError(Exception):
    """An error answered in OpenAI's shape: {"error": {"message", "type", "param", "code"}}."""

    def __init__(
        self,
        status: int,
        message: str,
        *,
        type: str = "invalid_request_error",
        param: str | None = None,
        code: str | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.type = type
        self.param = param
        self.code = code

    def body(self) -> dict[str, Any]:
        """The JSON body of the error response."""
        message = public_text(self.message)
        return {"error": {"message": message, "type": self.type, "param": self.param, "code": self.code}}


def bad_request(message: str, param: str | None = None, code: str | None = None) -> OpenAIError:
    """A 400 invalid_request_error."""
    return OpenAIError(400, message, param=param, code=code)
