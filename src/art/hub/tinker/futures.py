"""The SDK's futures: every work POST answers `{"request_id"}` at once; the client polls `retrieve_future`.

The client re-polls a `try_again` at once, without sleeping, so a poll is held (long-polled) until the work
is done or `HOLD_SECONDS` pass, under the SDK's 45 s timeout. Work that fails answers
`{"error", "category"}` in the future's body (the SDK raises `RequestFailedError`): "user" for what the
request got wrong (`BadInput`, `NotFound`), "server" for the rest (logged here).

Work on one training model runs in the order it was submitted (`Chain`): the SDK posts `optim_step` right
after `forward_backward` without waiting for its result, and numbers them for this order.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from typing import Any

from art.hub.tinker.ids import BadInput, NotFound

logger = logging.getLogger(__name__)

Result = dict[str, Any] | bytes
"""A future's answer: JSON, or the serialized protobuf of ForwardBackwardOutput / SampleResponse."""

HOLD_SECONDS = 25.0
"""How long a poll waits for its work before answering try_again."""


class Futures:
    """The server's futures by request id; the newest `keep` finished ones are remembered."""

    def __init__(self, keep: int = 4096) -> None:
        self._tasks: OrderedDict[str, asyncio.Task[Result]] = OrderedDict()
        self._ids = itertools.count(1)
        self._keep = keep

    def submit(self, work: Awaitable[Result]) -> str:
        """Start `work`; returns its request id."""
        request_id = f"req-{next(self._ids)}"
        self._tasks[request_id] = asyncio.ensure_future(_answered(work))
        while len(self._tasks) > self._keep:
            oldest, task = next(iter(self._tasks.items()))
            if not task.done():
                break
            del self._tasks[oldest]
        return request_id

    async def poll(self, request_id: str, hold: float = HOLD_SECONDS) -> Result | None:
        """The answer of `request_id`, or None if it is not ready within `hold` s; NotFound if unknown."""
        task = self._tasks.get(request_id)
        if task is None:
            raise NotFound(f"no request {request_id!r} on this server (it may have been forgotten)")
        done, _ = await asyncio.wait({task}, timeout=hold)
        return task.result() if done else None

    async def close(self) -> None:
        for task in self._tasks.values():
            task.cancel()


async def _answered(work: Awaitable[Result]) -> Result:
    try:
        return await work
    except (BadInput, NotFound) as e:
        return {"error": str(e), "category": "user"}
    except Exception as e:
        logger.exception("a Tinker request failed")
        return {"error": f"{type(e).__name__}: {e}", "category": "server"}


class Chain:
    """Runs the work given to it one after another, in the order given (one per training model)."""

    def __init__(self) -> None:
        self._last: asyncio.Future[Any] | None = None

    def then(self, work: Callable[[], Awaitable[Result]]) -> Awaitable[Result]:
        """`work()` once everything given before it has finished (failed or not)."""
        previous = self._last

        async def after() -> Result:
            if previous is not None:
                await asyncio.wait({previous})
            return await work()

        task = asyncio.ensure_future(after())
        self._last = task
        return task
