"""Build OpenAI Choice objects like ART's server returns them (token ids and logprobs included)."""

from __future__ import annotations

from typing import Any

from openai.types.chat.chat_completion import Choice


def make_choice(
    content: str | None = "hello",
    token_ids: list[int] | None = None,
    logprobs: list[float] | None = None,
    tool_calls: list[dict[str, Any]] | None = None,
    finish_reason: str = "stop",
    checkpoint_step: int | None = 0,
) -> Choice:
    token_ids = token_ids if token_ids is not None else [5, 6, 7]
    logprobs = logprobs if logprobs is not None else [-0.5] * len(token_ids)
    message: dict[str, Any] = {"role": "assistant", "content": content}
    if tool_calls:
        message["tool_calls"] = tool_calls
    return Choice.model_validate(
        {
            "index": 0,
            "finish_reason": finish_reason,
            "message": message,
            "logprobs": {
                "content": [
                    {"token": f"t{t}", "logprob": lp, "bytes": None, "top_logprobs": []}
                    for t, lp in zip(token_ids, logprobs, strict=True)
                ],
                "refusal": None,
            },
            "token_ids": token_ids,
            "checkpoint_step": checkpoint_step,
        }
    )
