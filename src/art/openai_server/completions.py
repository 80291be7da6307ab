"""POST /v1/completions: OpenAI's prompt-in endpoint (text or token ids in, text and token ids out).

`prompt` is a string, a list of token ids, or a list of either (a batch: choice `i * n + j` is the j-th
sample of prompt i, as OpenAI numbers them). A string is tokenized with the model's tokenizer
(`add_special_tokens`, default true, as vLLM does); token ids go to the engine as they are. The same
sampling fields as chat apply (including vLLM's extras and structured outputs: `response_format`,
`guided_*`, `structured_outputs`); `max_tokens` defaults to 16 (OpenAI's and vLLM's default here).

Every choice carries `token_ids` (the sampled ids, including a final stop token), `prompt_token_ids`,
`checkpoint_step` and always `logprobs` in this endpoint's legacy shape ({"tokens", "token_logprobs",
"top_logprobs", "text_offset"}, raw-logit logprobs as in chat; `top_logprobs` filled when `logprobs` = k > 0
asks for k alternatives). Streaming follows chat's rules (`generation`); a choice's first chunk carries its
`prompt_token_ids`. Refused (400): `echo`, `suffix`, `best_of` > 1 and the other fields in
`openai_protocol.REFUSED`.
"""

from __future__ import annotations

import secrets
import time
from typing import Any, ClassVar

from pydantic import Field

from art.openai_server.errors import bad_request
from art.openai_server.generation import (
    ChoiceBuilder,
    Completions,
    Held,
    Prepared,
    engine_error,
    request_seeds,
)
from art.openai_server.protocol import INT64_MAX, REFUSED, SamplingRequest, json_type

_CHAT_ONLY = {
    "audio",
    "functions",
    "function_call",
    "prediction",
    "reasoning_effort",
    "verbosity",
    "web_search_options",
    "add_generation_prompt",
    "continue_final_message",
    "chat_template",
    "chat_template_kwargs",
    "documents",
    "mm_processor_kwargs",
    "modalities",
    "add_special_tokens",
}


class CompletionRequest(SamplingRequest):
    """The fields of POST /v1/completions (see the module docstring)."""

    refused: ClassVar[tuple[str, ...]] = tuple(n for n in REFUSED if n not in _CHAT_ONLY)

    prompt: Any
    max_tokens: int | None = Field(16, ge=1, le=INT64_MAX)
    logprobs: int | None = Field(None, ge=0, le=20)
    add_special_tokens: bool | None = True

    def _check(self) -> None:
        super()._check()
        self.prompts()  # raises on a malformed prompt

    def prompts(self) -> list[str | list[int]]:
        """The prompt(s) as a list: strings and/or token-id lists (raises OpenAIError(400))."""
        prompt = self.prompt
        if isinstance(prompt, str) or _is_ids(prompt):
            return [prompt]
        if isinstance(prompt, list) and prompt and all(isinstance(p, str) or _is_ids(p) for p in prompt):
            return list(prompt)
        raise bad_request(
            "Invalid type for 'prompt': expected a string, an array of token ids, or an array of either, but got "
            f"{json_type(prompt)} instead.",
            param="prompt",
            code="invalid_type",
        )


def _is_ids(value: Any) -> bool:
    return isinstance(value, list) and bool(value) and all(type(t) is int for t in value)


class TextChoiceBuilder(ChoiceBuilder):
    """One completion choice: text and legacy logprobs."""

    def __init__(self, index: int, prompt_ids: list[int], request: CompletionRequest, **kwargs: Any) -> None:
        super().__init__(index, request.model, prompt_ids, request.stop_list, **kwargs)
        self.offset = 0  # characters of the token texts so far (legacy `text_offset`)

    def entry(self, token_id: int, logprob: float, tops: list[tuple[int, float]] | None) -> dict[str, Any]:
        text, _ = self.table.get(token_id)
        entry = {"token": text, "logprob": logprob, "offset": self.offset, "top": None}
        self.offset += len(text)
        if self.want_top and tops:
            entry["top"] = {self.table.get(tid)[0]: lp for tid, lp in tops}
        return entry

    def _legacy(self, entries: list[dict[str, Any]]) -> dict[str, Any]:
        return {
            "tokens": [e["token"] for e in entries],
            "token_logprobs": [e["logprob"] for e in entries],
            "top_logprobs": [e["top"] or {} for e in entries] if self.want_top else None,
            "text_offset": [e["offset"] for e in entries],
        }

    def choice(self) -> dict[str, Any]:
        return {
            "index": self.index,
            "text": self.content,
            "logprobs": self._legacy(self.logprobs),
            "finish_reason": self.finish_reason,
            "token_ids": self.token_ids,
            "prompt_token_ids": self.prompt_ids,
            "checkpoint_step": self.checkpoint_step,
        }

    def token_choice(self, held: Held, first: bool) -> dict[str, Any]:
        out = {
            "index": self.index,
            "text": held.text,
            "logprobs": self._legacy(held.entries),
            "finish_reason": None,
            "token_ids": held.ids,
            "checkpoint_step": self.checkpoint_step,
        }
        if first:
            out["prompt_token_ids"] = self.prompt_ids
        return out

    def final_choice(self) -> dict[str, Any]:
        return {
            "index": self.index,
            "text": "",
            "logprobs": None,
            "finish_reason": self.finish_reason,
            "token_ids": [],
            "checkpoint_step": self.checkpoint_step,
        }


class TextCompletions(Completions):
    """The /v1/completions handler for one engine."""

    object_name = "text_completion"
    chunk_object_name = "text_completion"

    def prepare(self, request: CompletionRequest) -> Prepared:
        """Check the model, tokenize the prompts, check the context window; raises OpenAIError (404/400)."""
        self.check_model(request.model)
        prompts = request.prompts()
        self.check_prompt_size(sum(len(p) for p in prompts if isinstance(p, str)), "prompt")
        tokenizer = self.engine.tokenizer
        vocab = len(tokenizer)
        limit = self.engine.max_model_len
        constraint = request.constraint()
        generates = []
        for i, prompt in enumerate(prompts):
            if isinstance(prompt, str):
                ids = list(
                    tokenizer.encode(prompt, add_special_tokens=request.add_special_tokens is not False)
                )
            else:
                ids = prompt
                if min(ids) < 0 or max(ids) >= vocab:
                    raise bad_request(
                        f"Invalid value for 'prompt': token ids must be in [0, {vocab}); got min {min(ids)}, "
                        f"max {max(ids)}.",
                        param="prompt",
                    )
            if len(ids) >= limit:
                raise bad_request(
                    f"This model's maximum context length is {limit} tokens. However, prompt {i} has {len(ids)} "
                    "tokens (at least one token must be left to generate).",
                    param="prompt",
                    code="context_length_exceeded",
                )
            for seed in request_seeds(request.seed, request.n):
                sampling = request.sampling_params(
                    seed=seed,
                    max_tokens=request.max_tokens,
                    top_logprobs=request.logprobs or 0,
                    constraint=constraint,
                )
                generates.append(self.generate_request(request.model, ids, sampling))
        include_usage = bool(request.stream_options and request.stream_options.include_usage)
        return Prepared(request, generates, "cmpl-" + secrets.token_hex(12), int(time.time()), include_usage)

    def builders(self, prepared: Prepared) -> list[ChoiceBuilder]:
        request: CompletionRequest = prepared.request
        prompts: dict[tuple[int, ...], list[int]] = {}  # one list per distinct prompt (usage counts it once)
        out: list[ChoiceBuilder] = []
        for index, generate in enumerate(prepared.generates):
            key = (index // request.n, *generate.prompt_token_ids)
            prompt_ids = prompts.setdefault(key, list(generate.prompt_token_ids))
            out.append(
                TextChoiceBuilder(
                    index,
                    prompt_ids,
                    request,
                    tokenizer=self.engine.tokenizer,
                    table=self.table,
                    skip_token_ids=request.stop_token_ids or (),
                    want_top=bool(request.logprobs),
                )
            )
        return out

    def engine_error(self, exc: BaseException) -> Any:
        return engine_error(exc, prompt_param="prompt")
