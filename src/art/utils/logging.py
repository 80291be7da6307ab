"""One-line status prints with a time stamp and a coloured tag (the reference's `art.utils.logging`, which
its examples use): `info`, `step`, `ok`, `warn`, `err`, and `dim` for secondary text; `_C` holds the ANSI
colours.

Example:
    step("generating scenarios")
    ok("24 scenarios")  # [12:00:03] OK    24 scenarios
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any


class _C:
    """ANSI colour and style codes."""

    RESET = "\x1b[0m"
    DIM = "\x1b[2m"
    BOLD = "\x1b[1m"
    ITAL = "\x1b[3m"
    GRAY = "\x1b[90m"
    BLUE = "\x1b[34m"
    CYAN = "\x1b[36m"
    GREEN = "\x1b[32m"
    YELLOW = "\x1b[33m"
    RED = "\x1b[31m"
    MAGENTA = "\x1b[35m"


def _ts() -> str:
    """The local time as HH:MM:SS."""
    return time.strftime("%H:%M:%S")


def _printer(colour: str, tag: str, example: str) -> Callable[[Any], None]:
    """A print function that writes `[HH:MM:SS] TAG   msg` with the tag in `colour`."""

    def show(msg: Any) -> None:
        print(f"[{_ts()}] {colour}{tag}{_C.RESET}{' ' * (6 - len(tag))}{msg}")

    show.__name__ = show.__qualname__ = tag.lower()
    show.__doc__ = f"Print `msg` after the time and a coloured {tag} tag.\n\nExample:\n    {example}\n"
    return show


info = _printer(_C.BLUE, "INFO", 'info("loading the model")')
step = _printer(_C.CYAN, "STEP", 'step("training step 3")')
ok = _printer(_C.GREEN, "OK", 'ok("checkpoint saved")')
warn = _printer(_C.YELLOW, "WARN", 'warn("the judge timed out; retrying")')
err = _printer(_C.RED, "ERR", 'err("the MCP server exited")')


def dim(msg: Any) -> None:
    """Print `msg` dimmed, without a tag or time stamp.

    Example:
        dim("   1. Find the cheapest flight  (difficulty 2/5)")
    """
    print(f"{_C.DIM}{msg}{_C.RESET}")
