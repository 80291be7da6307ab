"""Fixtures for training tests: the tiny model's tokenizer and template, and hand-built Choices."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("torch", reason="needs the `local` extra: pip install -e '.[local]'")

from openai.types.chat.chat_completion import Choice

from art.chat.chat_template import ChatTemplate

MakeChoice = Callable[..., Choice]


@pytest.fixture(scope="module")
def tokenizer(tiny_model_path: Path) -> Any:
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(tiny_model_path)


@pytest.fixture(scope="module")
def chat_template(tokenizer: Any) -> ChatTemplate:
    return ChatTemplate(tokenizer)


@pytest.fixture()
def make_choice(tokenizer: Any) -> MakeChoice:
    """Build a Choice as the engine returns it: message, per-token logprobs and the sampled `token_ids`."""

    def make(
        content: str | None = None,
        *,
        ids: Sequence[int] | None = None,
        logprobs: Sequence[float] | None = None,
        tool_calls: list[dict[str, Any]] | None = None,
        finish_reason: str = "stop",
        eos: bool = True,
        token_ids: bool = True,
        checkpoint_step: int | None = None,
        logprob_tokens: Sequence[str] | None = None,
    ) -> Choice:
        if ids is None:
            ids = tokenizer.encode(content or "", add_special_tokens=False)
            if eos:
                ids = [*ids, tokenizer.eos_token_id]
        ids = list(ids)
        logprobs = list(logprobs) if logprobs is not None else [-0.1 * (k + 1) for k in range(len(ids))]
        tokens = list(logprob_tokens) if logprob_tokens is not None else [tokenizer.decode([i]) for i in ids]
        data: dict[str, Any] = {
            "index": 0,
            "finish_reason": finish_reason,
            "message": {"role": "assistant", "content": content, "tool_calls": tool_calls},
            "logprobs": {
                "content": [
                    {"token": t, "logprob": lp, "bytes": None, "top_logprobs": []}
                    for t, lp in zip(tokens, logprobs, strict=False)
                ]
            },
        }
        if token_ids:
            data["token_ids"] = ids
        if checkpoint_step is not None:
            data["checkpoint_step"] = checkpoint_step
        return Choice.model_validate(data)

    return make
