"""An in-process stand-in for `openai.AsyncOpenAI` that answers with Hugging Face `generate`.

Benchmarks use it to run the examples' own rollouts (the exact code `art demo` trains with) against a
plain transformers model, without a server: `client.chat.completions.create(...)` renders the messages,
generates, and returns an `openai` ChatCompletion whose `choices[0]` carries the text, parsed
`tool_calls` and per-token logprobs. Concurrent requests (one per running rollout) are batched: a worker
collects whatever is waiting (up to `max_batch`) and generates for all of them at once, left-padded.

Rendering: without tools, the tokenizer's own chat template; with tools,
`art.chat.chat_template.ChatTemplate` (which falls back to a Hermes/ChatML template with
`<tools>` in the system turn when the model's template cannot render tools). Tool calls are parsed from
`<tool_call>{"name": ..., "arguments": {...}}</tool_call>` blocks; an unterminated last block counts too
when its JSON parses (generation stopped at <|im_end|> before the closing tag).
"""

from __future__ import annotations

import asyncio
import json
import re
import time
import uuid
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

import torch
from openai.types.chat import ChatCompletion

from art.chat.chat_template import ChatTemplate, normalize_tool_call_arguments

_TOOL_CALL = re.compile(r"<tool_call>\s*(.*?)\s*(?:</tool_call>|$)", re.DOTALL)


def parse_tool_calls(text: str) -> tuple[str | None, list[dict[str, Any]]]:
    """Split generated text into (content, tool calls in OpenAI's dict form)."""
    calls: list[dict[str, Any]] = []
    for match in _TOOL_CALL.finditer(text):
        try:
            payload = json.loads(match.group(1))
        except json.JSONDecodeError:
            continue
        if not isinstance(payload, dict) or not isinstance(payload.get("name"), str):
            continue
        arguments = payload.get("arguments", {})
        calls.append(
            {
                "id": f"call_{uuid.uuid4().hex[:12]}",
                "type": "function",
                "function": {"name": payload["name"], "arguments": normalize_tool_call_arguments(arguments)},
            }
        )
    content = _TOOL_CALL.sub("", text).strip() if calls else text
    return (content or None), calls


@dataclass
class _Request:
    prompt_ids: list[int]
    temperature: float
    max_tokens: int
    future: asyncio.Future[ChatCompletion]


@dataclass
class HFChatClient:
    """Duck-typed `AsyncOpenAI` for rollouts: `client.chat.completions.create(...)`, batched generate."""

    model: Any
    tokenizer: Any
    max_batch: int = 8
    generated_tokens: int = 0
    generate_seconds: float = 0.0
    _queue: asyncio.Queue[_Request] | None = None
    _worker: asyncio.Task[None] | None = None
    chat: Any = field(init=False)

    def __post_init__(self) -> None:
        self.template = ChatTemplate(self.tokenizer)
        self.chat = SimpleNamespace(completions=SimpleNamespace(create=self.create))
        self.eos_id = self.tokenizer.convert_tokens_to_ids("<|im_end|>")

    def render(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None) -> list[int]:
        """Prompt token ids: the model's own template without tools, ChatTemplate with them."""
        if tools:
            return self.template.render_ids(messages, tools, add_generation_prompt=True)
        text = self.tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
        return list(self.tokenizer.encode(text, add_special_tokens=False))

    async def create(
        self,
        *,
        model: str,
        messages: list[dict[str, Any]],
        tools: list[dict[str, Any]] | None = None,
        temperature: float = 1.0,
        max_tokens: int = 64,
        **_: Any,
    ) -> ChatCompletion:
        """Queue one request and wait for its batch."""
        if self._queue is None:
            self._queue = asyncio.Queue()
            self._worker = asyncio.create_task(self._run())
        future: asyncio.Future[ChatCompletion] = asyncio.get_running_loop().create_future()
        await self._queue.put(_Request(self.render(messages, tools), temperature, max_tokens, future))
        return await future

    async def close(self) -> None:
        """Stop the batching worker."""
        if self._worker is not None:
            self._worker.cancel()
            self._queue, self._worker = None, None

    async def _run(self) -> None:
        assert self._queue is not None
        while True:
            first = await self._queue.get()
            await asyncio.sleep(0.01)  # let the other rollouts' requests arrive
            batch = [first]
            while not self._queue.empty() and len(batch) < self.max_batch:
                batch.append(self._queue.get_nowait())
            by_temperature: dict[float, list[_Request]] = {}
            for request in batch:
                by_temperature.setdefault(request.temperature, []).append(request)
            for temperature, requests in by_temperature.items():
                try:
                    results = await asyncio.to_thread(self._generate, requests, temperature)
                except Exception as exc:  # hand the error to every waiting rollout
                    for request in requests:
                        request.future.set_exception(exc)
                    continue
                for request, result in zip(requests, results, strict=True):
                    request.future.set_result(result)

    def _generate(self, requests: list[_Request], temperature: float) -> list[ChatCompletion]:
        start = time.monotonic()
        pad = self.tokenizer.pad_token_id if self.tokenizer.pad_token_id is not None else self.eos_id
        width = max(len(r.prompt_ids) for r in requests)
        input_ids = torch.tensor([[pad] * (width - len(r.prompt_ids)) + r.prompt_ids for r in requests])
        attention = torch.tensor(
            [[0] * (width - len(r.prompt_ids)) + [1] * len(r.prompt_ids) for r in requests]
        )
        sampling: dict[str, Any] = (
            {"do_sample": True, "temperature": temperature, "top_k": 0, "top_p": 1.0}
            if temperature > 0
            else {"do_sample": False}
        )
        with torch.no_grad():
            out = self.model.generate(
                input_ids=input_ids,
                attention_mask=attention,
                max_new_tokens=max(r.max_tokens for r in requests),
                eos_token_id=self.eos_id,
                pad_token_id=pad,
                output_scores=True,
                return_dict_in_generate=True,
                **sampling,
            )
        new_tokens = out.sequences[:, width:]
        logprobs = torch.stack(out.scores, dim=1).float().log_softmax(-1)  # processed scores (temperature)
        results = []
        for i, request in enumerate(requests):
            ids: list[int] = []
            token_logprobs: list[float] = []
            for t, token in enumerate(new_tokens[i].tolist()[: request.max_tokens]):
                ids.append(token)
                token_logprobs.append(float(logprobs[i, t, token]))
                if token == self.eos_id:
                    break
            finished = bool(ids) and ids[-1] == self.eos_id
            text_ids = ids[:-1] if finished else ids
            self.generated_tokens += len(ids)
            results.append(self._completion(text_ids, token_logprobs, finished))
        self.generate_seconds += time.monotonic() - start
        return results

    def _completion(self, ids: list[int], token_logprobs: list[float], finished: bool) -> ChatCompletion:
        text = self.tokenizer.decode(ids, skip_special_tokens=False)
        content, tool_calls = parse_tool_calls(text)
        message: dict[str, Any] = {"role": "assistant", "content": content}
        if tool_calls:
            message["tool_calls"] = tool_calls
        pieces = [self.tokenizer.decode([t]) for t in ids]
        return ChatCompletion.model_validate(
            {
                "id": f"chatcmpl-{uuid.uuid4().hex[:12]}",
                "object": "chat.completion",
                "created": int(time.time()),
                "model": "hf-local",
                "choices": [
                    {
                        "index": 0,
                        "finish_reason": ("tool_calls" if tool_calls else "stop") if finished else "length",
                        "message": message,
                        "logprobs": {
                            "content": [
                                {"token": p, "logprob": lp, "bytes": list(p.encode()), "top_logprobs": []}
                                for p, lp in zip(pieces, token_logprobs, strict=False)
                            ]
                        },
                    }
                ],
            }
        )
