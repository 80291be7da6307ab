"""Starting the built-in torch engine for a service: in this process, serving the very model object the
trainer trains (one copy of the base weights). Its `KIND` is what `art.engines.factory` asks of the torch engine.
"""

from __future__ import annotations

import asyncio

from art.common.waits import waiting
from art.engines.base import Engine, EngineKind, EngineStart


async def start_torch_engine(start: EngineStart) -> Engine:
    from art.engines.torch.torch_engine import TorchEngine
    from art.kernels.threads import in_fresh_thread

    def build() -> TorchEngine:
        return TorchEngine(start.model, start.tokenizer, served_name=start.served_name, options=start.options)

    # The engine's setup does torch work (packing weights): in a thread that ends with it (`kernels.threads`).
    with waiting("starting the torch engine (packing the weights)"):
        return await asyncio.to_thread(in_fresh_thread, build)


KIND = EngineKind(start=start_torch_engine)
"""The torch engine: started in this process; no check, the trainer's device."""
