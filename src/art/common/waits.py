"""Long waits say what they wait for: a line on stderr once a wait passes ~2 s, and one when it ends.

A silent minute looks like a hang (`model.register()` once printed nothing for 217 s). `waiting(what)` wraps
a wait that may be long (loading a model, compiling kernels, a canary, a judge's answer): if the block is
still running after `NOTICE_AFTER_S` seconds, `[art] {what}...` is printed, and when it ends,
`[art] {what}: done in N s` (or `: failed after N s`); with `every`, `[art] {what}: N s so far` every `every`
seconds in between. A wait that ends sooner prints nothing, so quick runs (tests on tiny models) stay
quiet. A timer thread prints the first line, so it appears even while the
waiting thread is busy in native code; lines go through `tqdm.write`, so they never break a progress bar.
Standard library and tqdm only: any layer may use it.

Example:
    with waiting("loading smollm2-135m"):
        model = load()
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

NOTICE_AFTER_S = 2.0
"""Seconds a wait may last before it says what it waits for."""


def say(message: str) -> None:
    """Print `[art] {message}` on stderr at once.

    Example:
        >>> import contextlib, io
        >>> with contextlib.redirect_stderr(io.StringIO()) as err:
        ...     say("loading")
        >>> err.getvalue()
        '[art] loading\\n'
    """
    from tqdm import tqdm  # (a base dependency) clears any progress bar, prints, draws the bar again

    tqdm.write(f"[art] {message}", file=sys.stderr)
    sys.stderr.flush()


@contextmanager
def waiting(what: str, *, after: float | None = None, every: float | None = None) -> Iterator[None]:
    """Say `what` is being waited for once the block has run `after` seconds (default `NOTICE_AFTER_S`,
    read at each call) and, with `every`, again every `every` seconds; and how long it took.

    Example:
        with waiting("compiling the engine's kernels (once per machine)"):
            engine.warm_up()
    """
    start = time.monotonic()
    over = threading.Event()
    said = threading.Event()
    lock = threading.Lock()

    delay = NOTICE_AFTER_S if after is None else after

    def notices() -> None:
        if over.wait(delay):
            return
        with lock:
            if over.is_set():
                return
            said.set()
            say(f"{what}...")
        while every is not None and not over.wait(every):
            with lock:
                if not over.is_set():
                    say(f"{what}: {time.monotonic() - start:.0f} s so far")

    thread = threading.Thread(target=notices, name="art-waiting", daemon=True)
    thread.start()
    ok = False
    try:
        yield
        ok = True
    finally:
        with lock:
            over.set()
        if said.is_set():
            took = time.monotonic() - start
            say(f"{what}: {'done in' if ok else 'failed after'} {took:.0f} s")
