"""What /v1/chat/completions and /v1/completions share: running choices on an `Engine`, streaming them.

A request becomes one engine sequence per choice (`Prepared.generates`); each sequence's outputs go through a
`ChoiceBuilder` (`TextStream`: incremental text, stop strings; the endpoints add their own parsing and
formatting). `Completions.complete` gathers every choice into one response; `Completions.stream` sends
server-sent events.

Seeds: with `seed`, choice i samples with seed_i (seed_0 = seed), so a request is reproducible and its
first choice equals the same request with n=1. Without it each choice draws a random seed.

Streaming sends each choice's first token at once; after that a token goes out at once if the choice's
last chunk is `stream_interval` seconds old (default 0.1 s; 0 sends one chunk per token), else it is held,
and held tokens go out with the next token that may go, or when the oldest has waited the interval: a
chunk carries every token sampled since the last (text delta, one logprobs entry and one id per token),
and no token waits longer than the interval. Under load a decode step takes tens of milliseconds, so this
merges a few tokens per chunk, and the per-chunk work of the server and of every client (JSON, HTTP
framing, the `openai` client's parsing) competes less with generation for the CPU, while a reader still
sees text within a tenth of a second. Many streams at once stretch that interval: the server sends at most
`stream_chunk_rate` token chunks per second over all open streamed choices (default 128), so each waits
max(stream_interval, open choices / rate) between chunks: 32 concurrent streams get a chunk every 0.25 s,
12 or fewer keep 0.1 s. Every chunk costs its client ~0.3 ms of Python, and a rollout's clients usually
share the machine with the engine: at 32 streams on 2 cores the per-chunk work of server and clients took
~1.5 s of CPU per 4096 tokens at 0.1 s, and streamed throughput rose 5% at 0.3 s (benchmarks/README.md).
Then a final chunk per choice with the finish reason, a usage chunk when `stream_options.include_usage`
asks for it (OpenAI's rule), and `data: [DONE]`.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import math
import secrets
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from art.chat.detokenize import TextStream, TokenTable
from art.chat.grammar import GrammarError
from art.engines.base import (
    ContextLengthError,
    Engine,
    EngineClosedError,
    EngineUnavailableError,
    GenerateOutput,
    GenerateRequest,
    InvalidRequestError,
    ModelNotFoundError,
    SamplingParams,
    splitmix64_reference,
)
from art.openai_server.errors import OpenAIError, bad_request

DEFAULT_STREAM_INTERVAL = 0.1
"""Seconds a streamed choice's tokens may wait to go out together (see the module docstring)."""

DEFAULT_STREAM_CHUNK_RATE = 128.0
"""Token chunks per second the server sends over all open streamed choices, at most (module docstring)."""

_FLUSH = object()  # queued by the stream's timer: send every held token


def choice_seed(seed: int, index: int) -> int:
    """The sampling seed of choice `index` for a request seed (choice 0 uses the seed itself)."""
    seed %= 2**63
    return seed if index == 0 else splitmix64_reference(seed ^ (index * 0x9E3779B97F4A7C15)) % 2**63


def request_seeds(seed: int | None, n: int) -> list[int]:
    """One sampling seed per choice: derived from `seed` (`choice_seed`), else random."""
    return [choice_seed(seed, i) if seed is not None else secrets.randbits(63) for i in range(n)]


def engine_error(exc: BaseException, prompt_param: str = "messages") -> OpenAIError:
    """The OpenAI-shaped error for an exception raised by the engine."""
    if isinstance(exc, OpenAIError):
        return exc
    if isinstance(exc, ModelNotFoundError):
        return OpenAIError(404, str(exc), type="NotFoundError", param="model", code="model_not_found")
    if isinstance(exc, ContextLengthError):
        return bad_request(str(exc), param=prompt_param, code="context_length_exceeded")
    if isinstance(exc, InvalidRequestError | GrammarError):
        return bad_request(str(exc))
    if isinstance(exc, EngineUnavailableError):
        return OpenAIError(503, str(exc), type="server_error", code="engine_unavailable")
    if isinstance(exc, EngineClosedError):
        return OpenAIError(503, str(exc), type="server_error", code="engine_closed")
    return OpenAIError(500, f"internal error: {type(exc).__name__}: {exc}", type="server_error")


def usage(prompt_tokens: int, completion_tokens: int) -> dict[str, int]:
    """OpenAI's `usage` object."""
    return {
        "prompt_tokens": prompt_tokens,
        "completion_tokens": completion_tokens,
        "total_tokens": prompt_tokens + completion_tokens,
    }


@dataclass
class Held:
    """A streamed choice's tokens not yet sent (and what the endpoint made of them: `extras`, e.g. tool
    call deltas)."""

    text: str
    entries: list[dict[str, Any]]
    ids: list[int]
    since: float  # when the oldest of them arrived (event loop time)
    extras: list[dict[str, Any]] = field(default_factory=list)


@dataclass
class Prepared:
    """A validated request: one GenerateRequest per choice, and what the response reports."""

    request: Any
    generates: list[GenerateRequest]
    id: str
    created: int
    include_usage: bool


class ChoiceBuilder:
    """Accumulates one choice from engine outputs: ids, raw logprobs, text (stop strings applied).

    Endpoints subclass it: `entry` (one logprobs entry per token), `transform` (e.g. tool-call parsing of
    the text), `close` and the JSON of a choice, a token chunk and a final chunk."""

    def __init__(
        self,
        index: int,
        model: str,
        prompt_ids: list[int],
        stop: Sequence[str],
        tokenizer: Any,
        table: TokenTable,
        *,
        skip_token_ids: Sequence[int] = (),
        want_top: bool = False,
    ) -> None:
        self.index = index
        self.text = TextStream(tokenizer, stop, skip_token_ids=skip_token_ids)
        self.table = table
        self.want_top = want_top
        self.prompt_ids = prompt_ids
        self.token_ids: list[int] = []
        self.logprobs: list[dict[str, Any]] = []
        self.content = ""
        self.finish_reason: str | None = None
        self.checkpoint_step: int | None = None
        self.model = model
        self.rest = ""  # text `close` releases at the end (e.g. content held back by tool-call parsing)
        self.pending: list[dict[str, Any]] = []  # what `transform` made beyond text, not yet streamed

    def entry(self, token_id: int, logprob: float, tops: list[tuple[int, float]] | None) -> dict[str, Any]:
        """The logprobs entry of one sampled token."""
        raise NotImplementedError

    def transform(self, delta: str) -> str:
        """Text delta -> the delta the client may see now (default: unchanged). It may also add to
        `pending` (e.g. tool call deltas), which goes out with this output's tokens."""
        return delta

    def take_pending(self) -> list[dict[str, Any]]:
        """What `transform` added to `pending` since the last call (and forget it)."""
        out, self.pending = self.pending, []
        return out

    def add(self, out: GenerateOutput) -> tuple[str, list[dict[str, Any]], list[int]]:
        """Take one engine output; returns (text delta, logprob entries, token ids) to stream."""
        self.model, self.checkpoint_step = out.model, out.checkpoint_step
        self.token_ids.extend(out.token_ids)
        entries = [
            self.entry(t, lp, out.top_logprobs[i] if out.top_logprobs else None)
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
        delta = self.transform(delta)
        self.content += delta
        return delta, entries, list(out.token_ids)

    @property
    def done(self) -> bool:
        """Whether this choice has finished."""
        return self.finish_reason is not None

    def close(self) -> None:
        """Called once the choice is done, before `choice` / `final_choice`."""

    def choice(self) -> dict[str, Any]:
        """The non-streamed choice object."""
        raise NotImplementedError

    def token_choice(self, held: Held, first: bool) -> dict[str, Any]:
        """A streamed chunk's choice carrying `held` tokens (`first`: this choice's first token chunk)."""
        raise NotImplementedError

    def final_choice(self) -> dict[str, Any]:
        """The streamed chunk's choice carrying the finish reason (and what `close` produced)."""
        raise NotImplementedError


class Completions:
    """Runs prepared requests on one engine (see the module docstring); endpoints subclass it."""

    object_name = "chat.completion"
    chunk_object_name = "chat.completion.chunk"

    def __init__(
        self,
        engine: Engine,
        *,
        stream_interval: float = DEFAULT_STREAM_INTERVAL,
        stream_chunk_rate: float | None = DEFAULT_STREAM_CHUNK_RATE,
        max_prompt_chars: int | None = None,
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
        self.max_prompt_chars = max_prompt_chars
        self._derived_prompt_limit: int | None = None

    def prompt_limit(self) -> int:
        """The most characters a prompt may have (`max_prompt_chars`; by default what the context window
        could hold: max_model_len x the longest token of the vocabulary x 2, the 2 for normalizers that
        shorten text). Anything longer cannot fit, and rendering and tokenizing it costs ~190 MB of memory
        per MB of text, so it is refused (413) before either."""
        if self.max_prompt_chars is not None:
            return self.max_prompt_chars
        if self._derived_prompt_limit is None:
            vocab = self.engine.tokenizer.get_vocab()
            longest = max((len(token) for token in vocab), default=1)
            self._derived_prompt_limit = self.engine.max_model_len * max(longest, 1) * 2
        return self._derived_prompt_limit

    def check_prompt_size(self, chars: int, param: str) -> None:
        """Raise OpenAIError(413), naming the limit, for a prompt of more than `prompt_limit()` characters."""
        limit = self.prompt_limit()
        if chars > limit:
            raise OpenAIError(
                413,
                f"The prompt has {chars} characters; this server accepts at most {limit} (max_prompt_chars: "
                f"more cannot fit this model's context window of {self.engine.max_model_len} tokens).",
                type="invalid_request_error",
                param=param,
                code="prompt_too_large",
            )

    def interval(self) -> float:
        """Seconds a streamed choice's tokens may wait now: `stream_interval`, stretched so that all open
        streamed choices together send at most `stream_chunk_rate` chunks per second."""
        if self.stream_chunk_rate is None:
            return self.stream_interval
        return max(self.stream_interval, self.open_streams / self.stream_chunk_rate)

    def check_model(self, model: str) -> None:
        """Raise OpenAIError(404) unless the engine serves `model`."""
        if model not in self.engine.model_names():
            raise engine_error(ModelNotFoundError(model))

    def builders(self, prepared: Prepared) -> list[ChoiceBuilder]:
        """One builder per choice of the request."""
        raise NotImplementedError

    def generate_request(
        self, model: str, prompt_ids: list[int], sampling: SamplingParams
    ) -> GenerateRequest:
        """The engine request of one choice (raises OpenAIError(400) for a prompt that cannot run)."""
        if not prompt_ids:
            raise bad_request("The prompt is empty: give at least one token.", param="prompt")
        return GenerateRequest(model=model, prompt_token_ids=prompt_ids, sampling=sampling)

    def response_extra(self, prepared: Prepared) -> dict[str, Any]:
        """Fields added to the response (and to the first stream chunk)."""
        return {}

    def engine_error(self, exc: BaseException) -> OpenAIError:
        """The OpenAI-shaped error for an engine exception during this endpoint's request."""
        return engine_error(exc)

    async def _run_choice(
        self, builder: ChoiceBuilder, generate: GenerateRequest, sink: asyncio.Queue[Any] | None
    ) -> None:
        async with contextlib.aclosing(self.engine.generate(generate)) as outputs:
            async for out in outputs:
                delta, entries, ids = builder.add(out)
                extras = builder.take_pending()
                if sink is not None:
                    sink.put_nowait((builder, delta, entries, ids, extras))
                if builder.done:
                    break
        if not builder.done:  # the engine ended without a reason: treat as a stop
            builder.finish_reason = "stop"

    async def complete(self, prepared: Prepared) -> dict[str, Any]:
        """The non-streamed response as a JSON-ready dict."""
        builders = self.builders(prepared)
        try:
            await asyncio.gather(
                *(self._run_choice(b, g, None) for b, g in zip(builders, prepared.generates, strict=True))
            )
        except Exception as exc:
            raise self.engine_error(exc) from exc
        for b in builders:
            b.close()
        return {
            "id": prepared.id,
            "object": self.object_name,
            "created": prepared.created,
            "model": builders[0].model,
            "choices": [b.choice() for b in builders],
            "usage": usage(_prompt_tokens(builders), sum(len(b.token_ids) for b in builders)),
            **self.response_extra(prepared),
        }

    async def stream(self, prepared: Prepared) -> AsyncIterator[str]:
        """Server-sent events: chunks, a usage chunk if asked, then [DONE] (errors become an error event).

        Long on purpose: one response's event loop. The queue its choices feed, the tokens each choice holds
        back, when each last sent and the one flush timer are state its small closures share on the hot
        path of every token; as methods they would become fields of a per-response object."""
        builders = self.builders(prepared)
        queue: asyncio.Queue[Any] = asyncio.Queue()
        served = [prepared.request.model]  # becomes the resolved name (alias target) with the first output

        def chunk(choices: list[dict[str, Any]], **extra: Any) -> str:
            body = {
                "id": prepared.id,
                "object": self.chunk_object_name,
                "created": prepared.created,
                "model": served[0],
                "choices": choices,
                **extra,
            }
            return f"data: {json.dumps(body, ensure_ascii=False)}\n\n"

        async def run(b: ChoiceBuilder, g: GenerateRequest) -> None:
            try:
                await self._run_choice(b, g, queue)
            finally:
                queue.put_nowait((b, None, None, None, None))

        loop = asyncio.get_running_loop()
        held: list[Held | None] = [None] * len(builders)  # tokens not yet sent, per choice
        last_sent = [-math.inf] * len(builders)  # when each choice's last token chunk went out
        timer: asyncio.TimerHandle | None = None

        def token_chunk(b: ChoiceBuilder) -> str:
            h = held[b.index]
            assert h is not None
            first = last_sent[b.index] == -math.inf
            held[b.index], last_sent[b.index] = None, loop.time()
            return chunk([b.token_choice(h, first)])

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
                b, delta, entries, ids, extras = item
                if not started:  # the first chunk waits for the first token, which names the model
                    started, served[0] = True, b.model
                    first = self.first_chunk_choices(builders)
                    if first is not None:
                        yield chunk(first, **self.response_extra(prepared))
                if delta is None:  # this choice's task ended
                    if held[b.index] is not None:
                        yield token_chunk(b)
                    open_choices -= 1
                    self.open_streams -= 1
                    continue
                h, now = held[b.index], loop.time()
                if h is None:
                    h = held[b.index] = Held(delta, entries, ids, since=now, extras=extras)
                else:
                    h.text += delta
                    h.entries.extend(entries)
                    h.ids.extend(ids)
                    h.extras.extend(extras)
                interval = self.interval()
                if now - last_sent[b.index] >= interval:
                    yield token_chunk(b)
                elif timer is None:  # no token waits longer than the interval, even if the engine stalls
                    timer = loop.call_later(h.since + interval - now, queue.put_nowait, _FLUSH)
            for result in await asyncio.gather(*tasks, return_exceptions=True):
                if isinstance(result, BaseException):  # surface a failed choice
                    raise result
            for b in builders:
                b.close()
                yield chunk([b.final_choice()])
            if prepared.include_usage:
                tokens = sum(len(b.token_ids) for b in builders)
                yield chunk([], usage=usage(_prompt_tokens(builders), tokens))
        except Exception as exc:
            yield f"data: {json.dumps(self.engine_error(exc).body())}\n\n"
        finally:
            self.open_streams -= open_choices
            if timer is not None:
                timer.cancel()
            for task in tasks:
                task.cancel()
        yield "data: [DONE]\n\n"

    def first_chunk_choices(self, builders: list[ChoiceBuilder]) -> list[dict[str, Any]] | None:
        """The choices of a chunk sent before any token (chat: the role), or None to send none."""
        return None


def text_chars(value: Any) -> int:
    """Characters in every string of a JSON value (keys included): the size of a prompt before rendering.

    Example:
        >>> text_chars([{"role": "user", "content": "hi"}])  # role, user, content, hi
        17
    """
    total, stack = 0, [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            total += len(item)
        elif isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, list | tuple):
            stack.extend(item)
    return total


def _prompt_tokens(builders: list[ChoiceBuilder]) -> int:
    """Prompt tokens of a request, each prompt counted once however many choices it has (OpenAI's usage)."""
    return sum(len(p) for p in {id(b.prompt_ids): b.prompt_ids for b in builders}.values())
