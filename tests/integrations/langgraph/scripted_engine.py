"""A scripted engine behind ART's real server, for LangGraph capture tests.

A tiny random-weight model cannot be made to call tools, so `PromptScriptedEngine` picks each reply
from the rendered prompt (a function of the prompt text) and emits it as real token ids of the tiny
model's tokenizer, ending with `<|im_end|>`. Everything around it is the production path: our FastAPI
server renders the messages with the chat template, parses Hermes `<tool_call>` blocks into
`tool_calls`, and returns Choices with token ids and logprobs.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

KEY = "scripted-key"
Script = Callable[[str], str]


class PromptScriptedEngine:
    """Implements the parts of `art.engines.base.Engine` the server uses; replies come from `script`."""

    base_model_name = "scripted"
    max_model_len = 4096

    def __init__(self, model_path: Path) -> None:
        from transformers import AutoTokenizer

        from art.chat.chat_template import ChatTemplate

        self.tokenizer = AutoTokenizer.from_pretrained(str(model_path))
        self.chat_template = ChatTemplate(self.tokenizer)
        self.end_id = self.tokenizer.convert_tokens_to_ids("<|im_end|>")
        self.script: Script = lambda prompt: "hello"
        self.replies: list[tuple[str, list[int]]] = []  # (prompt text, sampled ids) per request

    def model_names(self) -> list[str]:
        return [self.base_model_name]

    async def generate(self, request: Any) -> AsyncIterator[Any]:
        from art.engines.base import GenerateOutput

        prompt = self.tokenizer.decode(request.prompt_token_ids)
        ids = [*self.tokenizer.encode(self.script(prompt), add_special_tokens=False), self.end_id]
        self.replies.append((prompt, ids))
        yield GenerateOutput(ids, [-0.5] * len(ids), None, "stop", request.model, 0)


@dataclass
class ScriptedServer:
    engine: PromptScriptedEngine
    url: str
