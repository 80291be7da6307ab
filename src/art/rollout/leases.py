"""Pinning which checkpoint a rollout uses (the reference's `art.adapter_leases`).

Inside `async with pin_inference_step(model.name, step):`, `model.get_inference_name()` answers
`"{name}@{step}"` instead of the newest step, so every request of one rollout goes to the policy that
started it, even when training publishes a newer step meanwhile. The pin is a context variable: tasks
started inside the block (e.g. by `asyncio.gather`) inherit it; other rollouts are not affected.

    async with pin_inference_step(model.name, 3):
        await rollout(model, scenario)  # every call names "agent@3"
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from contextvars import ContextVar
from types import MappingProxyType

_pins: ContextVar[Mapping[str, int]] = ContextVar("art_pinned_inference_steps", default=MappingProxyType({}))


def pinned_inference_step(model_name: str) -> int | None:
    """The step pinned for `model_name` in this context, or None."""
    return _pins.get().get(model_name)


@asynccontextmanager
async def pin_inference_step(model_name: str, step: int) -> AsyncIterator[None]:
    """Make `get_inference_name()` of the model called `model_name` answer `step` inside the block."""
    if step < 0:
        raise ValueError(f"pin_inference_step: step must be >= 0, got {step}")
    token = _pins.set(MappingProxyType({**_pins.get(), model_name: step}))
    try:
        yield
    finally:
        _pins.reset(token)


__all__ = ["pin_inference_step", "pinned_inference_step"]
