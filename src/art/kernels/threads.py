"""Where heavy torch work may run on CPU: one thread computes (see `art.engines.torch.torch_engine`).

torch's CPU parallelism is OpenMP (libgomp), which gives every thread that starts parallel work a pool of its
own; a process holding more pool threads than CPUs makes every pool's spin-waits short, and every decode step
slower. Work that must run outside the engine's worker (loading a model) runs in a fresh thread that ends
with it, so its pool goes away too.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any, TypeVar

T = TypeVar("T")


def in_fresh_thread(fn: Callable[[], T]) -> T:
    """fn() in a new thread that ends with it, so the OpenMP pool its torch work creates ends too; blocks the
    caller until then and re-raises fn's exception.

    Example:
        model, tokenizer = in_fresh_thread(lambda: load_model_and_tokenizer("smollm2-135m"))
    """
    box: dict[str, Any] = {}

    def target() -> None:
        try:
            box["result"] = fn()
        except BaseException as exc:  # handed to the caller below
            box["error"] = exc

    thread = threading.Thread(target=target, name="art-load")
    thread.start()
    thread.join()
    if "error" in box:
        raise box["error"]
    return box["result"]  # type: ignore[no-any-return]
