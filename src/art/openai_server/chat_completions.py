"""POST /v1/chat/completions on top of any `Engine`: prompt rendering, choices, streaming chunks.

One request becomes `n` engine sequences over the same prompt, rendered with the engine's `ChatTemplate`
(the module the trainer uses too, so both agree token for token). Each sequence's outputs go through a
`ChatChoiceBuilder`: `TextStream` (incremental text, stop strings) then, when tools are given and
`tool_choice` is not "none", `ToolCallStreamer` (Hermes `<tool_call>` parsing). With `tool_choice` "none"
the tools are still rendered into the prompt (so the trainer's re-rendering of the trajectory, which always
includes its tools, matches the sampled prompt) but calls are not parsed: the text stays content. With
`parallel_tool_calls` false only the first parsed call is returned (the token ids keep what was sampled).

Structured outputs (`response_format`, vLLM's `guided_*` / `structured_outputs`) and `tool_choice`
"required" or a named function become one grammar (`ChatCompletionRequest.constraint`) that the engine
enforces while sampling; the reply then always parses. A reply max_tokens cuts says finish_reason "length";
a cut tool call is never raw tags in `content`: the complete calls before the cut are returned, the cut
one left out (its arguments are not JSON).

Streamed tool calls go out as OpenAI sends them (`delta.tool_calls`), as they are generated: under a
tool-call grammar the name as soon as it is written, then the arguments piece by piece; in free text each
call whole as soon as its block closes (it could still turn out malformed before). The streamed calls and
content equal the non-streamed ones (one parser builds both), except that a stream under a grammar has
sent the start of a call max_tokens then cut, which the whole reply leaves out.

Every choice carries, beyond OpenAI's fields: `token_ids` (the sampled ids, including a final stop token),
`checkpoint_step` (step of the adapter that produced it; null for the base model) and always
`logprobs.content` (one entry per token id, raw-logit logprobs; `top_logprobs` filled only when asked).
The response (and the first stream chunk) carries `prompt_token_ids`. Streaming: see `generation`.
"""

from __future__ import annotations

import secrets
import time
from typing import Any

from art.chat.tool_calls import ToolCallStreamer, merge_call_deltas
from art.openai_server.errors import bad_request
from art.openai_server.generation import (
    ChoiceBuilder,
    Completions,
    Held,
    Prepared,
    request_seeds,
    text_chars,
)
from art.openai_server.protocol import ChatCompletionRequest


class ChatChoiceBuilder(ChoiceBuilder):
    """One chat choice: content, tool calls, `logprobs.content` entries."""

    def __init__(
        self,
        index: int,
        request: ChatCompletionRequest,
        prompt_ids: list[int],
        *,
        constrained: bool = False,
        **kwargs: Any,
    ) -> None:
        super().__init__(index, request.model, prompt_ids, request.stop_list, **kwargs)
        single_call = request.parallel_tool_calls is False
        self.tools = (
            ToolCallStreamer(fine=constrained, max_calls=1 if single_call else None)
            if request.parse_tools
            else None
        )
        self.calls: list[dict[str, Any]] = []
        self.final_calls: list[dict[str, Any]] = []  # call deltas `close` produced, for the final chunk
        self.tokens_as_ids = bool(request.return_tokens_as_token_ids)

    def _token(self, token_id: int) -> tuple[str, list[int]]:
        text, raw = self.table.get(token_id)
        return (f"token_id:{token_id}" if self.tokens_as_ids else text), raw

    def entry(self, token_id: int, logprob: float, tops: list[tuple[int, float]] | None) -> dict[str, Any]:
        text, raw = self._token(token_id)
        top = []
        if self.want_top and tops:
            for tid, lp in tops:
                t_text, t_raw = self._token(tid)
                top.append({"token": t_text, "logprob": lp, "bytes": t_raw})
        return {"token": text, "logprob": logprob, "bytes": raw, "top_logprobs": top}

    def transform(self, delta: str) -> str:
        if self.tools is None:
            return delta
        content, calls = self.tools.push(delta)
        self.pending.extend(calls)
        return content

    def close(self) -> None:
        """Parse the tool calls (finish_reason becomes "tool_calls" when there are some)."""
        if self.tools is None:
            return
        self.rest, self.final_calls, calls = self.tools.finish(cut=self.finish_reason == "length")
        self.content += self.rest
        if calls and self.finish_reason == "stop":
            self.finish_reason = "tool_calls"
        self.calls = [c.to_openai() for c in calls]

    def choice(self) -> dict[str, Any]:
        # As OpenAI and vLLM: content is null beside tool calls, and "" (not null) for an empty text reply,
        # which code written for them reads as a string (the reference's temporal-clue asserts it).
        message: dict[str, Any] = {
            "role": "assistant",
            "content": (self.content or None) if self.calls else self.content,
        }
        if self.calls:
            message["tool_calls"] = self.calls
        return {
            "index": self.index,
            "message": message,
            "finish_reason": self.finish_reason,
            "logprobs": {"content": self.logprobs, "refusal": None},
            "token_ids": self.token_ids,
            "checkpoint_step": self.checkpoint_step,
        }

    def token_choice(self, held: Held, first: bool) -> dict[str, Any]:
        delta: dict[str, Any] = {"content": held.text} if held.text else {}
        if held.extras:
            delta["tool_calls"] = merge_call_deltas(held.extras)
        return {
            "index": self.index,
            "delta": delta,
            "logprobs": {"content": held.entries, "refusal": None},
            "finish_reason": None,
            "token_ids": held.ids,
            "checkpoint_step": self.checkpoint_step,
        }

    def final_choice(self) -> dict[str, Any]:
        final: dict[str, Any] = {}
        if self.rest:
            final["content"] = self.rest
        if self.final_calls:  # what the end of the text completed (the rest went out as generated)
            final["tool_calls"] = merge_call_deltas(self.final_calls)
        return {
            "index": self.index,
            "delta": final,
            "logprobs": None,
            "finish_reason": self.finish_reason,
            "token_ids": [],
            "checkpoint_step": self.checkpoint_step,
        }


class ChatCompletions(Completions):
    """The chat completions handler for one engine."""

    def prepare(self, request: ChatCompletionRequest) -> Prepared:
        """Check the model and context window, render the prompt; raises OpenAIError (404/400)."""
        self.check_model(request.model)
        self.check_prompt_size(text_chars(request.messages) + text_chars(request.tools), "messages")
        read = sorted(set(request.chat_template_kwargs or {}) & self.engine.chat_template.variables())
        if read:
            raise bad_request(
                f"'chat_template_kwargs' is not supported by this server: this model's chat template reads "
                f"{read}, so the prompt would render differently from the trainer's",
                param="chat_template_kwargs",
                code="unsupported_parameter",
            )
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
        constraint = request.constraint()
        top_logprobs = (request.top_logprobs or 0) if request.logprobs else 0
        generates = [
            self.generate_request(
                request.model,
                prompt_ids,
                request.sampling_params(
                    seed=seed,
                    max_tokens=request.max_new_tokens,
                    top_logprobs=top_logprobs,
                    constraint=constraint,
                ),
            )
            for seed in request_seeds(request.seed, request.n)
        ]
        include_usage = bool(request.stream_options and request.stream_options.include_usage)
        return Prepared(
            request, generates, "chatcmpl-" + secrets.token_hex(12), int(time.time()), include_usage
        )

    def builders(self, prepared: Prepared) -> list[ChoiceBuilder]:
        request: ChatCompletionRequest = prepared.request
        prompt_ids = list(prepared.generates[0].prompt_token_ids)
        # Under a grammar every tool call is well formed, so its pieces can go out as they are generated.
        constrained = prepared.generates[0].sampling.structured_outputs is not None
        return [
            ChatChoiceBuilder(
                i,
                request,
                prompt_ids,
                constrained=constrained,
                tokenizer=self.engine.tokenizer,
                table=self.table,
                skip_token_ids=request.stop_token_ids or (),
                want_top=bool(request.logprobs) and bool(request.top_logprobs),
            )
            for i in range(request.n)
        ]

    def response_extra(self, prepared: Prepared) -> dict[str, Any]:
        return {"prompt_token_ids": list(prepared.generates[0].prompt_token_ids)}

    def first_chunk_choices(self, builders: list[ChoiceBuilder]) -> list[dict[str, Any]] | None:
        return [
            {
                "index": c.index,
                "delta": {"role": "assistant", "content": ""},
                "logprobs": None,
                "finish_reason": None,
            }
            for c in builders
        ]
