"""Trajectories recorded from the chat completions a coroutine makes, without touching its code.

    async def agent(question: str) -> None:          # any code using an OpenAI-compatible client
        client = model.openai_client()
        await client.chat.completions.create(model=model.get_inference_name(), messages=[...])
        auto_trajectory(required=True).reward = 1.0  # the running capture's trajectory

    trajectory = await art.capture_auto_trajectory(agent("2 + 2?"))

How: the first capture installs a hook on the transports of httpx and, where it is installed, httpx2
(`HTTPTransport.handle_request`, `AsyncHTTPTransport.handle_async_request`: `openai` 1.x and 2.x send through
httpx, 3.x through httpx2), as the reference does on httpx's responses. Outside a capture the hook only reads
a context variable. Inside one, a response to a request whose JSON body has `messages` is recorded when the
caller finishes reading it (streamed or not): its first choice (with logprobs, and with
`token_ids`/`checkpoint_step` from ART's server, so the turn is trainable) joins the conversation it
continues. The main conversation is `messages_and_choices`; a request that does not continue it (another
agent, other tools) continues or starts one of `additional_histories`, matched by the earlier messages and the
tools, as in the reference.
"""

from __future__ import annotations

import asyncio
import contextvars
import json
import logging
from collections.abc import AsyncIterator, Awaitable, Coroutine, Iterable, Iterator
from contextlib import contextmanager
from types import ModuleType
from typing import Any, Literal, overload

import httpx
from openai.types.chat.chat_completion import Choice

from art.trajectories import (
    History,
    MetadataValue,
    MetricValue,
    PydanticException,
    Trajectory,
    TrajectoryGroup,
)

logger = logging.getLogger(__name__)


class AutoTrajectoryContext:
    """One capture: the trajectory it fills, and the recording of each finished response."""

    def __init__(self) -> None:
        self.trajectory = Trajectory()
        self._token: contextvars.Token[AutoTrajectoryContext | None] | None = None

    def __enter__(self) -> Trajectory:
        install_httpx_hook()
        self._token = _context.set(self)
        return self.trajectory

    def __exit__(self, *exc: object) -> None:
        if self._token is not None:
            _context.reset(self._token)
        self.trajectory.finish()

    def record(self, request: Any, response: Any, raw: bytes) -> None:
        """Add a finished chat completion to the trajectory: `request` and `response` as the transport saw
        them (httpx's or httpx2's types), `raw` the response bytes as they came off the wire."""
        if not 200 <= response.status_code < 300:
            return
        try:
            body = json.loads(request.content or b"")
        except Exception:  # not read (a streamed upload), not JSON, not text: not a chat completion
            return
        if not isinstance(body, dict) or not isinstance(body.get("messages"), list):
            return  # not a chat completion
        try:  # the same library's Response undoes the content encoding (gzip etc.)
            content = type(response)(response.status_code, headers=response.headers, content=raw).read()
            choice = (
                choice_from_sse(content.decode("utf-8"))
                if body.get("stream")
                else Choice.model_validate(json.loads(content)["choices"][0])
            )
        except (ValueError, KeyError, IndexError, TypeError) as exc:
            logger.debug("auto_trajectory: response not recorded (%s)", exc)
            return
        if choice is not None:
            self._add(body["messages"], body.get("tools"), choice)

    def _add(self, messages: list[Any], tools: Any, choice: Choice) -> None:
        history: Trajectory | History | None = None
        candidates: list[Trajectory | History] = [self.trajectory, *self.trajectory.additional_histories]
        for candidate in candidates:
            known = candidate.messages()
            fresh = not known and candidate.tools is None
            if (fresh or candidate.tools == tools) and _continues(messages, known):
                history = candidate
                break
        if history is None:
            history = History(messages_and_choices=[])
            self.trajectory.additional_histories.append(history)
        history.messages_and_choices.extend(messages[len(history.messages_and_choices) :])
        history.messages_and_choices.append(choice)
        history.tools = tools


_context: contextvars.ContextVar[AutoTrajectoryContext | None] = contextvars.ContextVar(
    "art_auto_trajectory", default=None
)


def _normal(message: Any) -> tuple[Any, ...]:
    """What makes two messages the same turn, whatever the client added (None vs "" content, extra keys)."""
    if not isinstance(message, dict):
        return (repr(message),)
    calls = tuple(
        (c.get("function", {}).get("name"), c.get("function", {}).get("arguments"))
        for c in message.get("tool_calls") or []
        if isinstance(c, dict)
    )
    return (message.get("role"), message.get("content") or "", calls, message.get("tool_call_id"))


def _continues(messages: list[Any], known: list[Any]) -> bool:
    """Whether `messages` starts with the conversation `known`."""
    return len(messages) >= len(known) and all(
        _normal(a) == _normal(b) for a, b in zip(messages, known, strict=False)
    )


def choice_from_sse(text: str) -> Choice | None:
    """The first choice of a streamed chat completion (server-sent events), its deltas merged: content,
    tool calls, logprobs, and ART's `token_ids` and `checkpoint_step`. None if the stream did not finish."""
    content: list[str] = []
    calls: dict[int, dict[str, Any]] = {}
    logprobs: list[Any] = []
    token_ids: list[int] = []
    extra: dict[str, Any] = {}
    finish_reason = None
    for line in text.splitlines():
        if not line.startswith("data:"):
            continue
        data = line[5:].strip()
        if data == "[DONE]":
            continue
        chunk = json.loads(data)
        for choice in chunk.get("choices") or []:
            if choice.get("index", 0) != 0:
                continue
            delta = choice.get("delta") or {}
            content.append(delta.get("content") or "")
            for call in delta.get("tool_calls") or []:
                merged = calls.setdefault(call.get("index", 0), {"type": "function", "function": {}})
                if call.get("id"):
                    merged["id"] = call["id"]
                function = call.get("function") or {}
                if function.get("name"):
                    merged["function"]["name"] = function["name"]
                merged["function"]["arguments"] = merged["function"].get("arguments", "") + (
                    function.get("arguments") or ""
                )
            logprobs.extend((choice.get("logprobs") or {}).get("content") or [])
            token_ids.extend(choice.get("token_ids") or [])
            if "checkpoint_step" in choice:
                extra["checkpoint_step"] = choice["checkpoint_step"]
            finish_reason = choice.get("finish_reason") or finish_reason
    if finish_reason is None:
        return None
    text_content = "".join(content)
    message: dict[str, Any] = {"role": "assistant", "content": text_content or None}
    if calls:
        message["tool_calls"] = [calls[i] for i in sorted(calls)]
    body: dict[str, Any] = {
        "index": 0,
        "message": message,
        "finish_reason": finish_reason,
        "logprobs": {"content": logprobs, "refusal": None} if logprobs else None,
        **extra,
    }
    if token_ids:
        body["token_ids"] = token_ids
    return Choice.model_validate(body)


class _RecordingAsyncStream:
    """An async response body that hands its bytes to the capture once the caller has read and closed it."""

    def __init__(self, inner: Any, context: AutoTrajectoryContext, request: Any, response: Any) -> None:
        self._inner, self._context, self._request, self._response = inner, context, request, response
        self._chunks: list[bytes] = []

    async def __aiter__(self) -> AsyncIterator[bytes]:
        async for chunk in self._inner:
            self._chunks.append(chunk)
            yield chunk

    async def aclose(self) -> None:
        await self._inner.aclose()
        self._context.record(self._request, self._response, b"".join(self._chunks))


class _RecordingStream:
    """A response body that hands its bytes to the capture once the caller has read and closed it."""

    def __init__(self, inner: Any, context: AutoTrajectoryContext, request: Any, response: Any) -> None:
        self._inner, self._context, self._request, self._response = inner, context, request, response
        self._chunks: list[bytes] = []

    def __iter__(self) -> Iterator[bytes]:
        for chunk in self._inner:
            self._chunks.append(chunk)
            yield chunk

    def close(self) -> None:
        self._inner.close()
        self._context.record(self._request, self._response, b"".join(self._chunks))


_hooked: set[str] = set()  # the HTTP libraries whose transports are hooked


def http_libraries() -> list[ModuleType]:
    """The installed HTTP libraries an OpenAI client may send through: httpx, and httpx2 if installed."""
    libraries: list[ModuleType] = [httpx]
    try:
        import httpx2  # openai>=3 sends through it
    except ImportError:
        pass
    else:
        libraries.append(httpx2)
    return libraries


def install_httpx_hook() -> None:
    """Wrap the default transports of httpx (and httpx2) once, so responses inside a capture are recorded
    (idempotent)."""
    for library in http_libraries():
        if library.__name__ not in _hooked:
            _hooked.add(library.__name__)
            _hook_transports(library)


def _hook_transports(library: ModuleType) -> None:
    """Wrap `library.HTTPTransport.handle_request` and `library.AsyncHTTPTransport.handle_async_request`."""
    async_transport, sync_transport = library.AsyncHTTPTransport, library.HTTPTransport
    original_async = async_transport.handle_async_request
    original_sync = sync_transport.handle_request
    # the library's responses accept only its own stream types as bodies
    async_stream = type("RecordingAsyncStream", (_RecordingAsyncStream, library.AsyncByteStream), {})
    sync_stream = type("RecordingStream", (_RecordingStream, library.SyncByteStream), {})

    async def handle_async_request(self: Any, request: Any) -> Any:
        response = await original_async(self, request)
        context = _context.get()
        if context is not None:
            response.stream = async_stream(response.stream, context, request, response)
        return response

    def handle_request(self: Any, request: Any) -> Any:
        response = original_sync(self, request)
        context = _context.get()
        if context is not None:
            response.stream = sync_stream(response.stream, context, request, response)
        return response

    async_transport.handle_async_request = handle_async_request
    sync_transport.handle_request = handle_request


@overload
def auto_trajectory(*, required: Literal[True]) -> Trajectory: ...


@overload
def auto_trajectory(*, required: Literal[False] = False) -> Trajectory | None: ...


def auto_trajectory(*, required: bool = False) -> Trajectory | None:
    """The trajectory of the running `capture_auto_trajectory`, e.g. to set its reward from inside the
    agent; None outside one (a RuntimeError with `required=True`).

    Example:
        answer = await client.chat.completions.create(model=model.get_inference_name(), messages=msgs)
        art.auto_trajectory(required=True).reward = score(answer)
    """
    context = _context.get()
    if context is None:
        if required:
            raise RuntimeError(
                "auto_trajectory(required=True) was called outside a capture: run the code with "
                "`await art.capture_auto_trajectory(coroutine)`"
            )
        return None
    return context.trajectory


async def capture_auto_trajectory(coroutine: Coroutine[Any, Any, Any]) -> Trajectory:
    """Run `coroutine` and return the trajectory of the chat completions it made (its result is dropped;
    set the reward through `auto_trajectory()` inside, or on the returned trajectory). `metrics["duration"]`
    holds the seconds it took.

    Example:
        trajectory = await art.capture_auto_trajectory(agent("What is 2 + 2?"))
        trajectory.reward = 1.0 if "4" in trajectory.messages()[-1]["content"] else 0.0
    """
    with AutoTrajectoryContext() as trajectory:
        await coroutine
    return trajectory


# ---- openpipe-art 0.5.23's names for the same capture --------------------------------------------------
# 0.5.23 replaced `auto_trajectory`/`capture_auto_trajectory` with these. Its capture records raw HTTP
# exchanges into `Trajectory.exchanges`; ours records each chat completion as a Choice in
# `messages_and_choices` (and `additional_histories`), as 0.5.18 did and as ART's trainer reads them.
@overload
def current_trajectory(*, require: Literal[True]) -> Trajectory: ...


@overload
def current_trajectory(*, require: Literal[False] = False) -> Trajectory | None: ...


def current_trajectory(*, require: bool = False) -> Trajectory | None:
    """The trajectory of the innermost running capture (`art.trajectory`), or None (a RuntimeError with
    `require=True`): openpipe-art 0.5.23's name for `auto_trajectory`.

    Example:
        art.current_trajectory(require=True).reward = 1.0  # inside the coroutine given to art.trajectory
    """
    context = _context.get()
    if context is None:
        if require:
            raise RuntimeError(
                "No trajectory is active in this context: run the code with art.trajectory(...)"
            )
        return None
    return context.trajectory


@contextmanager
def no_capture() -> Iterator[None]:
    """Hide the enclosing capture inside the block: its chat completions are not recorded there, and
    `current_trajectory()` is None; a capture started inside still records (openpipe-art 0.5.23's).

    Example:
        with art.no_capture():
            await judge_client.chat.completions.create(...)  # not part of the trajectory
    """
    token = _context.set(None)
    try:
        yield
    finally:
        _context.reset(token)


async def trajectory(coroutine: Coroutine[Any, Any, object]) -> Trajectory:
    """Run `coroutine` (a raw coroutine: a Task or Future is refused, as in openpipe-art 0.5.23) and return
    the trajectory of the chat completions it made: 0.5.23's name for `capture_auto_trajectory`.

    Example:
        traj = await art.trajectory(agent("What is 2 + 2?"))
    """
    if isinstance(coroutine, asyncio.Future) or not isinstance(coroutine, Coroutine):
        raise TypeError("Expected a raw coroutine, not a Task, Future, or awaitable")
    return await capture_auto_trajectory(coroutine)


async def trajectory_group(
    trajectories: Iterable[Trajectory | BaseException | Awaitable[Trajectory]],
    *,
    exceptions: Iterable[BaseException | PydanticException] = (),
    metadata: dict[str, MetadataValue] | None = None,
    metrics: dict[str, MetricValue] | None = None,
    logs: list[str] | None = None,
    return_exceptions: bool = False,
) -> TrajectoryGroup:
    """A group of trajectories, awaiting the awaitables among them concurrently outside any enclosing
    capture (openpipe-art 0.5.23's). An awaitable that fails fails the group (the others are cancelled),
    unless `return_exceptions`: then its exception joins `exceptions`. The same awaitable twice runs once.

    Example:
        group = await art.trajectory_group(art.trajectory(agent(q)) for _ in range(8))
    """
    errors = list(exceptions)
    for error in errors:
        if isinstance(error, BaseException) and not isinstance(error, Exception):
            raise error
    with no_capture():
        results = await _gather_rollouts(list(trajectories), return_exceptions)
    return TrajectoryGroup(results, exceptions=errors, metadata=metadata, metrics=metrics, logs=logs)


async def _gather_rollouts(
    items: list[Trajectory | BaseException | Awaitable[Trajectory]], return_exceptions: bool
) -> list[Trajectory | BaseException]:
    """Each item's trajectory (or, with `return_exceptions`, its exception), in order."""
    futures: dict[int, asyncio.Future[Trajectory]] = {}
    for item in items:
        if isinstance(item, BaseException) and not isinstance(item, Exception):
            raise item
        if not isinstance(item, Trajectory | BaseException) and id(item) not in futures:
            futures[id(item)] = asyncio.ensure_future(item)
    outcomes: dict[int, Trajectory | BaseException] = {}
    try:
        if futures:
            when = asyncio.ALL_COMPLETED if return_exceptions else asyncio.FIRST_EXCEPTION
            await asyncio.wait(futures.values(), return_when=when)
        # all done now, unless one failed without return_exceptions: that one raises here
        for future in futures.values():
            error = future.exception() if future.done() else None
            if error is not None and (not return_exceptions or not isinstance(error, Exception)):
                raise error
        for key, future in futures.items():
            outcome = future.exception() or future.result()
            if not isinstance(outcome, Trajectory | BaseException):
                raise TypeError("trajectory_group awaitables must resolve to trajectories")
            outcomes[key] = outcome
    finally:
        pending = [f for f in futures.values() if not f.done()]
        for future in pending:
            future.cancel()
        await asyncio.gather(*pending, return_exceptions=True)
    return [item if isinstance(item, Trajectory | BaseException) else outcomes[id(item)] for item in items]


__all__ = [
    "AutoTrajectoryContext",
    "auto_trajectory",
    "capture_auto_trajectory",
    "choice_from_sse",
    "current_trajectory",
    "no_capture",
    "trajectory",
    "trajectory_group",
]
