"""One-line status prints with a time stamp and a coloured tag (the reference's `art.utils.logging`, which
its examples use): `info`, `step`, `ok`, `warn`, `err`, and `dim` for secondary text; `_C` holds the ANSI
colours.

Example:
    step("generating scenarios")
    ok("24 scenarios")  # [12:00:03] OK    24 scenarios
"""

from __future__ import annotations

import time
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


def _tagged(colour: str, tag: str, msg: Any) -> None:
    print(f"[{_ts()}] {colour}{tag}{_C.RESET}{' ' * (6 - len(tag))}{msg}")


def info(msg: Any) -> None:
    """Print `msg` with a blue INFO tag.

    Example:
        info("loading the model")
    """
    _tagged(_C.BLUE, "INFO", msg)


def step(msg: Any) -> None:
    """Print `msg` with a cyan STEP tag.

    Example:
        step("training step 3")
    """
    _tagged(_C.CYAN, "STEP", msg)


def ok(msg: Any) -> None:
    """Print `msg` with a green OK tag.

    Example:
        ok("checkpoint saved")
    """
    _tagged(_C.GREEN, "OK", msg)


def warn(msg: Any) -> None:
    """Print `msg` with a yellow WARN tag.

    Example:
        warn("the judge timed out; retrying")
    """
    _tagged(_C.YELLOW, "WARN", msg)


def err(msg: Any) -> None:
    """Print `msg` with a red ERR tag.

    Example:
        err("the MCP server exited")
    """
    _tagged(_C.RED, "ERR", msg)


def dim(msg: Any) -> None:
    """Print `msg` dimmed, without a tag or time stamp.

    Example:
        dim("   1. Find the cheapest flight  (difficulty 2/5)")
    """
    print(f"{_C.DIM}{msg}{_C.RESET}")
