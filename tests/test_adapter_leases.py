"""`pin_inference_step`: inside the block a model's default inference name is the pinned step; tasks started
inside inherit the pin, other models and code outside do not."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

import art
from art.adapter_leases import pin_inference_step, pinned_inference_step


async def test_a_pin_names_the_step_inside_the_block_only(tmp_path: Path, fake_backend) -> None:  # type: ignore[no-untyped-def]
    model = art.TrainableModel(name="a", project="p", base_model="tiny", base_path=str(tmp_path))
    other = art.TrainableModel(name="b", project="p", base_model="tiny", base_path=str(tmp_path))
    await model.register(fake_backend)
    await other.register(fake_backend)
    fake_backend._save(model, 1)
    fake_backend._save(model, 2)
    assert model.get_inference_name() == "a@2"
    async with pin_inference_step("a", 1):
        assert pinned_inference_step("a") == 1 and pinned_inference_step("b") is None
        assert model.get_inference_name() == "a@1"
        assert model.get_inference_name(step=2) == "a@2"  # an explicit step still wins
        assert other.get_inference_name() == "b@0"
        names = await asyncio.gather(*(asyncio.to_thread(model.get_inference_name) for _ in range(2)))
        assert names == ["a@1", "a@1"]  # inherited by tasks and threads started inside
        async with pin_inference_step("a", 0):
            assert model.get_inference_name() == "a@0"
        assert model.get_inference_name() == "a@1"
    assert model.get_inference_name() == "a@2"

    async def outside() -> str:
        return model.get_inference_name()

    task = asyncio.create_task(outside())  # made outside any pin
    async with pin_inference_step("a", 1):
        assert await task == "a@2"
    with pytest.raises(ValueError, match="step must be >= 0"):
        async with pin_inference_step("a", -1):
            pass
