"""`wrap_rollout` and `init_chat_model`: a LangGraph agent's LLM calls become one ART `Trajectory`.

`wrap_rollout(model, fn)` returns an async function that runs `fn` (a rollout that builds its agent with
`init_chat_model` and returns an `art.Trajectory` with its reward) and records every chat-completions call
made while it runs. `init_chat_model()` returns a real LangChain `ChatOpenAI` pointed at the model's
server, so `bind_tools`, `with_structured_output`, `create_react_agent`... behave as usual.

How calls are captured: the chat model's HTTP clients carry an httpx response hook that, for each
`POST .../chat/completions`, appends the request body and the response body (JSON, as sent and received)
to the call log of the rollout running in the current context (a `contextvars` variable set by the
wrapper; LangGraph runs nodes in tasks and threads that inherit it). Recording the wire format rather than
LangChain's message objects keeps what training needs: each reply is the server's `Choice` with its sampled
token ids and logprobs. Calls made outside a wrapped rollout are not recorded.

When `fn` returns, the calls become the trajectory's conversations (`conversations.fill_trajectory`) and
the log file is deleted. When `fn` raises, the exception propagates (a `TrajectoryGroup` counts it toward
`gather_trajectory_groups`' `max_exceptions`), with a note naming the log file, which is kept:
`load_trajectory(path)` rebuilds the partial trajectory from it.
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import json
import uuid
import weakref
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, ParamSpec

import httpx
from pydantic import SecretStr

from art.integrations.langgraph.call_log import CallLog, LoggedCall, call_log_path, read_call_log
from art.integrations.langgraph.conversations import fill_trajectory
from art.trajectories import Trajectory

if TYPE_CHECKING:
    from langchain_openai import ChatOpenAI

    from art.integrations.tracked import ServedModel

P = ParamSpec("P")


@dataclass
class _Rollout:
    model: ServedModel
    log: CallLog


_CURRENT: contextvars.ContextVar[_Rollout | None] = contextvars.ContextVar(
    "art_langgraph_rollout", default=None
)


def _is_chat_completion(request: httpx.Request) -> bool:
    return request.method == "POST" and request.url.path.rstrip("/").endswith("/chat/completions")


def _record(response: httpx.Response) -> None:
    """Append the call that `response` answers to the current rollout's log (body already read)."""
    rollout = _CURRENT.get()
    if rollout is None or not _is_chat_completion(response.request):
        return
    try:
        request_body = json.loads(response.request.content or b"{}")
    except json.JSONDecodeError:
        request_body = {"unparsed": response.request.content.decode("utf-8", "replace")}
    call = LoggedCall(request=request_body, status_code=response.status_code)
    if "text/event-stream" in response.headers.get("content-type", ""):
        call.error = "a streamed response was not captured (init_chat_model turns streaming off)"
    elif response.is_success:
        try:
            call.response = response.json()
        except json.JSONDecodeError:
            call.error = f"the response is not JSON: {response.text[:200]!r}"
    else:
        call.error = response.text[:2000]
    rollout.log.append(call)


async def _record_async(response: httpx.Response) -> None:
    if _CURRENT.get() is not None and _is_chat_completion(response.request):
        await response.aread()
        _record(response)


def _record_sync(response: httpx.Response) -> None:
    if _CURRENT.get() is not None and _is_chat_completion(response.request):
        response.read()
        _record(response)


# One pair of recording HTTP clients for every chat model (the hooks find the rollout from the context), so
# connections are pooled across rollouts; the async client is per event loop, since its pool is bound to one.
_sync_client: httpx.Client | None = None
_async_clients: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, httpx.AsyncClient] = (
    weakref.WeakKeyDictionary()
)


def _recording_clients() -> tuple[httpx.Client, httpx.AsyncClient]:
    global _sync_client
    if _sync_client is None:
        _sync_client = httpx.Client(event_hooks={"response": [_record_sync]}, timeout=None)
    loop = asyncio.get_running_loop()
    client = _async_clients.get(loop)
    if client is None:
        client = _async_clients[loop] = httpx.AsyncClient(
            event_hooks={"response": [_record_async]}, timeout=None
        )
    return _sync_client, client


# Connection settings LangChain users pass that would point the chat model away from the trained model.
_ENDPOINT_KWARGS = (
    "base_url",
    "openai_api_base",
    "api_key",
    "openai_api_key",
    "http_client",
    "http_async_client",
)


def init_chat_model(
    model: str | None = None,
    *,
    model_provider: str | None = None,
    configurable_fields: Any = None,
    config_prefix: str | None = None,
    **kwargs: Any,
) -> ChatOpenAI:
    """A LangChain `ChatOpenAI` that talks to the model of the wrapped rollout running now.

    Call it inside a function wrapped with `wrap_rollout(model, fn)`. As in the reference, the chat model
    always serves the wrapped model (`model.get_inference_name()`, i.e. its latest step), whatever `model`
    and `model_provider` say, so an agent written for LangChain's own `init_chat_model("openai:gpt-4o")`
    runs unchanged; `configurable_fields` and `config_prefix` are accepted and ignored. Other keyword
    arguments go to `ChatOpenAI` (e.g. `temperature`, default 1.0 as in the reference; `max_tokens`,
    `timeout`). Streaming is off (`disable_streaming=True`), so every reply comes back whole, with its
    token ids, and `logprobs` is requested.

    Example::

        async def rollout(model: art.Model, scenario: Scenario) -> art.Trajectory:
            agent = create_react_agent(init_chat_model(), tools=[search, read])
            await agent.ainvoke({"messages": [HumanMessage(scenario.question)]})
            return art.Trajectory(messages_and_choices=[], reward=score(...))

        trajectory = await wrap_rollout(model, rollout)(model, scenario)
    """
    from langchain_openai import ChatOpenAI

    rollout = _CURRENT.get()
    if rollout is None:
        raise RuntimeError(
            "art.langgraph.init_chat_model() was called outside a wrapped rollout: build the agent inside "
            "the function you pass to art.langgraph.wrap_rollout(model, fn), and call the wrapped function"
        )
    endpoint = [k for k in _ENDPOINT_KWARGS if k in kwargs]
    if endpoint:
        raise TypeError(
            f"init_chat_model(): {', '.join(endpoint)} cannot be set: the chat model always talks to the "
            "wrapped model's server (set inference_base_url/inference_api_key on the art.Model instead)"
        )
    if kwargs.get("streaming"):
        raise ValueError(
            "init_chat_model(streaming=True): streaming is not supported inside a wrapped rollout, because "
            "each reply must come back whole with its token ids; remove streaming=True"
        )
    served = rollout.model
    if served.inference_base_url is None:
        raise RuntimeError(
            f"model {served.name!r} has no inference endpoint: `await model.register(backend)` before running "
            "the wrapped rollout (or pass inference_base_url=... for a model served elsewhere)"
        )
    options: dict[str, Any] = {"temperature": 1.0, "logprobs": True, **kwargs, "disable_streaming": True}
    sync_client, async_client = _recording_clients()
    return ChatOpenAI(
        model=served.get_inference_name(),
        base_url=served.inference_base_url,
        api_key=SecretStr(served.inference_api_key or "EMPTY"),
        http_client=sync_client,
        http_async_client=async_client,
        **options,
    )


def wrap_rollout(
    model: ServedModel, fn: Callable[P, Awaitable[Trajectory]]
) -> Callable[P, Awaitable[Trajectory]]:
    """Wrap an async rollout so that the LLM calls of the agent it runs become its trajectory.

    The wrapped function takes the same arguments as `fn`. Its trajectory (the one `fn` returns, with the
    reward, metrics and metadata `fn` set) gets the captured conversations: the first as
    `messages_and_choices` and `tools`, any that diverged from it appended to `additional_histories`
    (see `art.integrations.langgraph.conversations`). If `fn` raises, the exception propagates with a note naming the
    JSON log of the calls made so far, which is kept under the model's folder (`langgraph/`).

    Example::

        groups = await art.gather_trajectory_groups(
            (art.TrajectoryGroup(wrap_rollout(model, rollout)(model, s) for _ in range(4)) for s in scenarios),
            max_exceptions=0.1,
        )
    """

    @functools.wraps(fn)
    async def wrapper(*args: P.args, **kwargs: P.kwargs) -> Trajectory:
        log = CallLog(path=call_log_path(model.storage, uuid.uuid4().hex))
        token = _CURRENT.set(_Rollout(model, log))
        try:
            result = await fn(*args, **kwargs)
        except Exception as exc:
            exc.add_note(_kept_note(log))
            raise
        finally:
            _CURRENT.reset(token)
        if not isinstance(result, Trajectory):
            error = TypeError(
                f"the rollout wrapped by art.langgraph.wrap_rollout returned {type(result).__name__}; "
                "it must return an art.Trajectory (its messages are filled in from the captured calls)"
            )
            error.add_note(_kept_note(log))
            raise error
        fill_trajectory(result, log.calls)
        log.discard()
        return result

    return wrapper


def _kept_note(log: CallLog) -> str:
    if not log.calls:
        return "art.langgraph: the rollout made no LLM call before it failed"
    return (
        f"art.langgraph: the {len(log.calls)} LLM call(s) made before the failure are kept in {log.path} "
        "(art.langgraph.load_trajectory(path) rebuilds the partial trajectory)"
    )


def load_trajectory(path: str | Path) -> Trajectory:
    """The trajectory recorded in a call log file (e.g. the partial one of a rollout that raised).

    Example:
        trajectory = load_trajectory(call_log_path(model.storage, "rollout-1"))
    """
    return fill_trajectory(Trajectory(messages_and_choices=[]), read_call_log(path))
