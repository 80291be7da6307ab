"""A tiny model served over HTTP by our real server, with the official `openai` clients (server tests)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

KEY = "test-key"
USER = [{"role": "user", "content": "What is the digit?"}]


class Served:
    """An engine behind a running server (127.0.0.1, a free port), with clients."""

    def __init__(self, engine: Any, **app_options: Any) -> None:
        import openai

        from art.openai_server.http import ServerThread, create_app

        self.engine = engine
        self.server = ServerThread(create_app(engine, api_key=KEY, **app_options))
        self.url = self.server.start()
        self.client = openai.OpenAI(base_url=self.url, api_key=KEY, max_retries=0)

    def aclient(self) -> Any:
        import openai

        return openai.AsyncOpenAI(base_url=self.url, api_key=KEY, max_retries=0)

    def close(self) -> None:
        self.server.stop()
        if hasattr(self.engine, "close"):
            asyncio.run(self.engine.close())


def serve_tiny(path: Path, name: str, *, max_model_len: int = 512, **app_options: Any) -> Served:
    """The tiny model at `path` served as `name` (float32, one thread, a 512-token context by default)."""
    import torch

    from art.engines.torch.torch_engine import TorchEngine

    torch.set_num_threads(1)
    engine = TorchEngine.from_pretrained(
        str(path), served_name=name, dtype="float32", max_model_len=max_model_len, num_threads=1
    )
    return Served(engine, **app_options)


def hf_logprobs(model: Any, prompt_ids: list[int], token_ids: list[int]) -> list[float]:
    """Logprobs of token_ids after prompt_ids from a separate float32 HF forward pass (raw logits)."""
    import torch

    ids = torch.tensor([prompt_ids + token_ids])
    with torch.inference_mode():
        logprobs = torch.log_softmax(model(ids).logits[0].float(), -1)
    start = len(prompt_ids) - 1
    return (
        logprobs[start : start + len(token_ids)]
        .gather(-1, torch.tensor(token_ids)[:, None])
        .squeeze(-1)
        .tolist()
    )


def float32_hf(path: Path) -> Any:
    """The model at `path` as a float32 Hugging Face model in eval mode."""
    import torch
    from transformers import AutoModelForCausalLM

    return AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32).eval()
