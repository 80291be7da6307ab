"""POST /v1/chat/completions on top of any `Engine`: prompt rendering, choices, streaming chunks.

One request becomes `n` engine sequences over the same prompt, rendered with the engine's `ChatTemplate`
(the module the trainer uses too, so both agree token for token). Each sequence's outputs go through a
`_ChoiceBuilder`: `TextStream` (incremental text, stop strings) then, when tools are given and
`tool_choice` is not "none", `ToolCallStreamer` (Hermes `<tool_call>` parsing). With `tool_choice` "none"
the tools are still rendered into the prompt (so the trainer's re-rendering of the trajectory, which always
includes its tools, matches the sampled prompt) but calls are not parsed: the text stays content.

Every choice carries, beyond OpenAI's fields: `token_ids` (the sampled ids, including a final stop token),
`checkpoint_step` (step of the adapter that produced it; null for the base model) and always
`logprobs.content` (one entry per token id, raw-logit logprobs; `top_logprobs` filled only when asked).
The response (and the first stream chunk) carries `prompt_token_ids`.

Seeds: with `seed`, choice i samples with seed_i (seed_0 = seed), so a request is reproducible and its
first choice equals the same request with n=1. Without it each choice draws a random seed.
Streaming sends each choice's first token at once; after that a token goes out at once if the choice's
last chunk is `stream_interval` seconds old (default 0.1 s; 0 sends one chunk per token), else it is held,
and held tokens go out with the next token that may go, or when the oldest has waited the interval: a
chunk carries every token sampled since the last (content delta, one logprobs entry and one id per token),
and no token waits longer than the interval. Under load a decode step takes tens of milliseconds, so this
merges a few tokens per chunk, and the per-chunk work of the server and of every client (JSON, HTTP
framing, the `openai` client's parsing) competes less with generation for the CPU, while a reader still
sees text within a tenth of a second. Many streams at once stretch that interval: the server sends at most
`stream_chunk_rate` token chunks per second over all open streamed choices (default 128), so each waits
max(stream_interval, open choices / rate) between chunks: 32 concurrent streams get a chunk every 0.25 s,
12 or fewer keep 0.1 s. Every chunk costs its client ~0.3 ms of Python, and a rollout's clients usually
share the machine with the engine: at 32 streams on 2 cores the per-chunk work of server and clients took
~1.5 s of CPU per 4096 tokens at 0.1 s, and streamed throughput rose 5% at 0.3 s (benchmarks/README.md).
Then a final chunk per choice with the finish reason (and any tool calls), a usage chunk and `data: [DONE]`.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import math
import secrets
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

from art.chat.detokenize import TextStream, TokenTable
from art.chat.tool_calls import ToolCallStreamer
from art.engines.base import (
    ContextLengthError,
    Engine,
    EngineClosedError,
    EngineUnavailableError,
    GenerateOutput,
    GenerateRequest,
    ModelNotFoundError,
    SamplingParams,
    splitmix64_reference,
)
from art.service.openai_protocol import ChatCompletionRequest, OpenAIError, bad_request


def choice_seed(seed: int, index: int) -> int:
    """The sampling seed of choice `index` for a request seed (choice 0 uses the seed itself)."""
    seed %= 2**63
    return seed if index == 0 else splitmix64_reference(seed ^ (index * 0x9E3779B97F4A7C15)) % 2**63


def engine_error(exc: BaseException) -> OpenAIError:
    """The OpenAI-shaped error for an exception raised by the engine."""
    if isinstance(exc, OpenAIError):
        return exc
    if isinstance(exc, ModelNotFoundError):
        return OpenAIError(404, str(exc), type="NotFoundError", param="model", code="model_not_found")
    if isinstance(exc, ContextLengthError):
        return bad_request(str(exc), param="messages", code="context_length_exceeded")
    if isinstance(exc, EngineUnavailableError):
        return OpenAIError(503, str(exc), type="server_error", code="engine_unavailable")
    if isinstance(exc, EngineClosedError):
        return OpenAIError(503, str(exc), type="server_error", code="engine_closed")
    return OpenAIError(500, f"internal error: {type(exc).__name__}: {exc}", type="server_error")


DEFAULT_STREAM_INTERVAL = 0.1
"""Seconds a streamed choice's tokens may wait to go out together (see the module docstring)."""

DEFAULT_STREAM_CHUNK_RATE = 128.0
"""Token chunks per second the server sends over all open streamed choices, at most (module docstring)."""

_FLUSH = object()  # queued by the stream's timer: send every held token


@dataclass
class _Held:
    """A streamed choice's tokens not yet sent."""

    content: str
    entries: list[dict[str, Any]]
    ids: list[int]
    since: float  # when the oldest of them arrived (event loop time)


@dataclass
class Prepared:
    """A validated request with its prompt ids and one GenerateRequest per choice."""

    request: ChatCompletionRequest
    prompt_ids: list[int]
    generates: list[GenerateRequest]
    id: str
    created: int


class _ChoiceBuilder:
    """Accumulates one choice from engine outputs (see the module docstring)."""

    def __init__(self, index: int, request: ChatCompletionRequest, tokenizer: Any, table: TokenTable) -> None:
        self.index = index
        self.text = TextStream(tokenizer, request.stop_list)
        self.tools = ToolCallStreamer() if request.parse_tools else None
        self.table = table
        self.want_top = bool(request.logprobs) and bool(request.top_logprobs)
        self.token_ids: list[int] = []
        self.logprobs: list[dict[str, Any]] = []
        self.content = ""
        self.finish_reason: str | None = None
        self.checkpoint_step: int | None = None
        self.model = request.model

    def _entry(self, token_id: int, logprob: float, tops: list[tuple[int, float]] | None) -> dict[str, Any]:
        text, raw = self.table.get(token_id)
        top = []
        if self.want_top and tops:
            for tid, lp in tops:
                t_text, t_raw = self.table.get(tid)
                top.append({"token": t_text, "logprob": lp, "bytes": t_raw})
        return {"token": text, "logprob": logprob, "bytes": raw, "top_logprobs": top}

    def add(self, out: GenerateOutput) -> tuple[str, list[dict[str, Any]], list[int]]:
        """Take one engine output; returns (content delta, logprob entries, token ids) to stream."""
        self.model, self.checkpoint_step = out.model, out.checkpoint_step
        self.token_ids.extend(out.token_ids)
        entries = [
            self._entry(t, lp, out.top_logprobs[i] if out.top_logprobs else None)
            for i, (t, lp) in enumerate(zip(out.token_ids, out.logprobs, strict=True))
        ]
        self.logprobs.extend(entries)
        delta = self.text.push(out.token_ids)
        if self.text.stopped:
            self.finish_reason = "stop"
        elif out.finish_reason is not None:
            self.finish_reason = "stop" if out.finish_reason == "abort" else out.finish_reason
        if self.finish_reason is not None:
            delta += self.text.finish()
        if self.tools is not None:
            delta = self.tools.push(delta)
        self.content += delta
        return delta, entries, list(out.token_ids)

    @property
    def done(self) -> bool:
        """Whether this choice has finished."""
        return self.finish_reason is not None

    def close(self) -> tuple[str, list[dict[str, Any]]]:
        """(last content delta, tool calls in OpenAI shape) once done; may turn the reason into tool_calls."""
        if self.tools is None:
            return "", []
        rest, calls = self.tools.finish()
        self.content += rest
        if calls and self.finish_reason == "stop":
            self.finish_reason = "tool_calls"
        return rest, [c.to_openai() for c in calls]

    def choice(self, tool_calls: list[dict[str, Any]]) -> dict[str, Any]:
        """The non-streamed choice object."""
        message: dict[str, Any] = {"role": "assistant", "content": self.content or None}
        if tool_calls:
            message["tool_calls"] = tool_calls
        return {
            "index": self.index,
            "message": message,
            "finish_reason": self.finish_reason,
            "logprobs": {"content": self.logprobs, "refusal": None},
            "token_ids": self.token_ids,
            "checkpoint_step": self.checkpoint_step,
        }


class ChatCompletions:
    """The chat completions handler for one engine."""

    def __init__(
        self,
        engine: Engine,
        *,
        stream_interval: float = DEFAULT_STREAM_INTERVAL,
        stream_chunk_rate: float | None = DEFAULT_STREAM_CHUNK_RATE,
    ) -> None:
        if stream_interval < 0:
            raise ValueError(f"stream_interval must be >= 0 seconds; got {stream_interval}")
        if stream_chunk_rate is not None and not stream_chunk_rate > 0:
            raise ValueError(
                f"stream_chunk_rate must be > 0 chunks per second (or None: no limit); got {stream_chunk_rate}"
            )
        self.engine = engine
        self.stream_interval = stream_interval
        self.stream_chunk_rate = stream_chunk_rate
        self.open_streams = 0  # streamed choices in progress (`interval`)
        self.table = TokenTable(engine.tokenizer)

    def interval(self) -> float:
        """Seconds a streamed choice's tokens may wait now: `stream_interval`, stretched so that all open
        streamed choices together send at most `stream_chunk_rate` chunks per second."""
        if self.stream_chunk_rate is None:
            return self.stream_interval
        return max(self.stream_interval, self.open_streams / self.stream_chunk_rate)

    def prepare(self, request: ChatCompletionRequest) -> Prepared:
        """Check the model and context window, render the prompt; raises OpenAIError (404/400)."""
        if request.model not in self.engine.model_names():
            raise engine_error(ModelNotFoundError(request.model))
        try:
            prompt_ids = self.engine.chat_template.render_ids(
                request.messages, request.tools, add_generation_prompt=True
            )
        except Exception as exc:  # a template error is the request's fault (e.g. roles out of order)
            raise bad_request(
                f"the chat template could not render these messages: {exc}", param="messages"
            ) from None
        limit = self.engine.max_model_len
        if len(prompt_ids) >= limit:
            raise bad_request(
                f"This model's maximum context length is {limit} tokens. However, your messages resulted "
                f"in {len(prompt_ids)} tokens (at least one token must be left to generate).",
                param="messages",
                code="context_length_exceeded",
            )
        base_seed = request.seed if request.seed is not None else None
        generates = []
        for i in range(request.n):
            seed = choice_seed(base_seed, i) if base_seed is not None else secrets.randbits(63)
            sampling = SamplingParams(
                temperature=1.0 if request.temperature is None else request.temperature,
                top_p=1.0 if request.top_p is None else request.top_p,
                max_tokens=request.max_new_tokens,
                seed=seed,
                top_logprobs=(request.top_logprobs or 0) if request.logprobs else 0,
                ignore_eos=request.ignore_eos,
            )
            generates.append(
                GenerateRequest(model=request.model, prompt_token_ids=prompt_ids, sampling=sampling)
            )
        return Prepared(request, prompt_ids, generates, "chatcmpl-" + secrets.token_hex(12), int(time.time()))

    async def _run_choice(
        self, builder: _ChoiceBuilder, generate: GenerateRequest, sink: asyncio.Queue[Any] | None
    ) -> None:
        async with contextlib.aclosing(self.engine.generate(generate)) as outputs:
            async for out in outputs:
                delta, entries, ids = builder.add(out)
                if sink is not None:
                    sink.put_nowait((builder, delta, entries, ids))
                if builder.done:
                    break
        if not builder.done:  # the engine ended without a reason: treat as a stop
            builder.finish_reason = "stop"

    async def complete(self, prepared: Prepared) -> dict[str, Any]:
        """The non-streamed ChatCompletion as a JSON-ready dict."""
        request = prepared.request
        builders = [_ChoiceBuilder(i, request, self.engine.tokenizer, self.table) for i in range(request.n)]
        try:
            await asyncio.gather(
                *(self._run_choice(b, g, None) for b, g in zip(builders, prepared.generates, strict=True))
            )
        except Exception as exc:
            raise engine_error(exc) from exc
        choices = [b.choice(b.close()[1]) for b in builders]
        completion_tokens = sum(len(b.token_ids) for b in builders)
        return {
            "id": prepared.id,
            "object": "chat.completion",
            "created": prepared.created,
            "model": builders[0].model,
            "choices": choices,
            "usage": _usage(len(prepared.prompt_ids), completion_tokens),
            "prompt_token_ids": prepared.prompt_ids,
        }

    async def stream(self, prepared: Prepared) -> AsyncIterator[str]:
        """Server-sent events: chunks, a usage chunk, then [DONE] (errors become an error event)."""
        request = prepared.request
        builders = [_ChoiceBuilder(i, request, self.engine.tokenizer, self.table) for i in range(request.n)]
        queue: asyncio.Queue[Any] = asyncio.Queue()
        served = [request.model]  # becomes the resolved name (alias target) with the first output

        def chunk(choices: list[dict[str, Any]], **extra: Any) -> str:
            body = {
                "id": prepared.id,
                "object": "chat.completion.chunk",
                "created": prepared.created,
                "model": served[0],
                "choices": choices,
                **extra,
            }
            return f"data: {json.dumps(body, ensure_ascii=False)}\n\n"

        async def run(b: _ChoiceBuilder, g: GenerateRequest) -> None:
            try:
                await self._run_choice(b, g, queue)
            finally:
                queue.put_nowait((b, None, None, None))

        loop = asyncio.get_running_loop()
        held: list[_Held | None] = [None] * len(builders)  # tokens not yet sent, per choice
        last_sent = [-math.inf] * len(builders)  # when each choice's last token chunk went out
        timer: asyncio.TimerHandle | None = None

        def token_chunk(b: _ChoiceBuilder) -> str:
            h = held[b.index]
            assert h is not None
            held[b.index], last_sent[b.index] = None, loop.time()
            return chunk(
                [
                    {
                        "index": b.index,
                        "delta": {"content": h.content} if h.content else {},
                        "logprobs": {"content": h.entries, "refusal": None},
                        "finish_reason": None,
                        "token_ids": h.ids,
                        "checkpoint_step": b.checkpoint_step,
                    }
                ]
            )

        tasks = [asyncio.create_task(run(b, g)) for b, g in zip(builders, prepared.generates, strict=True)]
        open_choices, started = len(builders), False
        self.open_streams += open_choices
        try:
            while open_choices:
                item = await queue.get()
                if item is _FLUSH:  # the interval passed with tokens held: send them now
                    timer = None
                    for b in builders:
                        if held[b.index] is not None:
                            yield token_chunk(b)
                    continue
                b, delta, entries, ids = item
                if not started:  # the role chunk waits for the first token, which names the model
                    started, served[0] = True, b.model
                    yield chunk(
                        [
                            {
                                "index": c.index,
                                "delta": {"role": "assistant", "content": ""},
                                "logprobs": None,
                                "finish_reason": None,
                            }
                            for c in builders
                        ],
                        prompt_token_ids=prepared.prompt_ids,
                    )
                if delta is None:  # this choice's task ended
                    if held[b.index] is not None:
                        yield token_chunk(b)
                    open_choices -= 1
                    self.open_streams -= 1
                    continue
                h, now = held[b.index], loop.time()
                if h is None:
                    h = held[b.index] = _Held(delta, entries, ids, since=now)
                else:
                    h.content += delta
                    h.entries.extend(entries)
                    h.ids.extend(ids)
                interval = self.interval()
                if now - last_sent[b.index] >= interval:
                    yield token_chunk(b)
                elif timer is None:  # no token waits longer than the interval, even if the engine stalls
                    timer = loop.call_later(h.since + interval - now, queue.put_nowait, _FLUSH)
            for result in await asyncio.gather(*tasks, return_exceptions=True):
                if isinstance(result, BaseException):  # surface a failed choice
                    raise result
            for b in builders:
                rest, calls = b.close()
                final: dict[str, Any] = {}
                if rest:
                    final["content"] = rest
                if calls:
                    final["tool_calls"] = [{"index": k, **c} for k, c in enumerate(calls)]
                yield chunk(
                    [
                        {
                            "index": b.index,
                            "delta": final,
                            "logprobs": None,
                            "finish_reason": b.finish_reason,
                            "token_ids": [],
                            "checkpoint_step": b.checkpoint_step,
                        }
                    ]
                )
            completion_tokens = sum(len(b.token_ids) for b in builders)
            yield chunk([], usage=_usage(len(prepared.prompt_ids), completion_tokens))
        except Exception as exc:
            yield f"data: {json.dumps(engine_error(exc).body())}\n\n"
        finally:
            self.open_streams -= open_choices
            if timer is not None:
                timer.cancel()
            for task in tasks:
                task.cancel()
        yield "data: [DONE]\n\n"


def _usage(prompt_tokens: int, completion_tokens: int) -> dict[str, int]:
    return {
        "prompt_tokens": prompt_tokens,
        "completion_tokens": completion_tokens,
        "total_tokens": prompt_tokens + completion_tokens,
    }
