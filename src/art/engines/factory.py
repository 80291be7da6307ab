"""Which engine a service gets, and starting it: `RuntimeOptions.engine` decides.

- "torch": the built-in `TorchEngine`, in this process, serving the very model object the trainer trains
  (one copy of the base weights).
- "vllm": vLLM's OpenAI server in a subprocess (GPU; its CPU build works too): not available yet.

`check_engine_available` runs before anything loads, so a missing engine fails in a second with the fix.
"""

from __future__ import annotations

import asyncio
from typing import Any

from ..types import RuntimeOptions
from .base import Engine


def check_engine_available(options: RuntimeOptions) -> None:
    """Raise a clear error (with the fix) if `options.engine` cannot run here; before any model loads."""
    if options.engine == "vllm":
        raise ValueError(
            'engine="vllm" is not available yet in this version; use engine="torch" (the built-in engine)'
        )


async def start_engine(
    options: RuntimeOptions, *, base_model: str, served_name: str, model: Any, tokenizer: Any
) -> Engine:
    """Start the engine `options.engine` for `base_model`, served as `served_name`.

    `model` and `tokenizer` are the loaded base model the trainer owns; an engine in this process serves that
    same object (the torch engine), one in another process loads its own copy from `base_model`."""
    check_engine_available(options)
    from ..engines.torch.torch_engine import TorchEngine
    from ..kernels.threads import in_fresh_thread

    def build() -> TorchEngine:
        return TorchEngine(
            model,
            tokenizer,
            served_name=served_name,
            max_num_seqs=options.max_num_seqs,
            max_model_len=options.max_model_len,
            options=options,
        )

    # The engine's setup does torch work (packing weights): in a thread that ends with it (`kernels.threads`).
    return await asyncio.to_thread(in_fresh_thread, build)
