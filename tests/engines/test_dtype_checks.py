"""A dtype an engine cannot serve is refused before anything loads, naming the dtype and what serves it."""

from __future__ import annotations

from pathlib import Path

import pytest

import art
from art.engines import factory
from art.engines.vllm import start as vllm_start
from art.types import RuntimeOptions


def test_an_unknown_dtype_is_refused_when_the_options_are_made() -> None:
    with pytest.raises(
        ValueError, match=r"dtype='float64' is not one the engines serve: use bfloat16, float16, float32"
    ):
        RuntimeOptions(dtype="float64")
    with pytest.raises(ValueError, match="dtype='int8'"):
        art.LocalBackend(dtype="int8")
    assert RuntimeOptions(dtype="BF16").dtype == "bf16" and RuntimeOptions(dtype="auto").dtype is None


@pytest.mark.parametrize(
    ("capability", "refused"), [((7, 0), True), ((7, 5), True), ((8, 0), False), ((9, 0), False)]
)
def test_vllm_refuses_bf16_on_gpus_older_than_ampere(
    capability: tuple[int, int], refused: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(vllm_start, "_cuda_count", lambda: 1)
    monkeypatch.setattr(vllm_start, "_cuda_capability", lambda index: capability)
    vllm = RuntimeOptions(engine="vllm")
    if refused:
        with pytest.raises(
            ValueError, match=r"dtype=bfloat16: the vllm engine cannot serve it on cuda:0 .*float16"
        ):
            factory.check_dtype(vllm, "torch.bfloat16", "cuda:0")
    else:
        factory.check_dtype(vllm, "torch.bfloat16", "cuda:0")
    factory.check_dtype(vllm, "torch.float16", "cuda:0")  # fp16 is fine on any GPU
    factory.check_dtype(
        RuntimeOptions(engine="torch"), "torch.bfloat16", "cuda:0"
    )  # torch serves bf16 anywhere
    factory.check_dtype(vllm, "torch.bfloat16", "cpu")  # vLLM's CPU build serves bf16 (checked here)


async def test_register_fails_with_the_reason_before_the_model_loads(
    tiny_model_path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The check runs at register, before the base model is read: a V100 user learns it in a second."""
    from art.base_model import loader

    monkeypatch.setattr(factory, "check_engine_available", lambda options: None)  # no vLLM needed to get here
    monkeypatch.setattr(loader, "resolve_device", lambda device: "cuda:0")
    monkeypatch.setattr(vllm_start, "_cuda_count", lambda: 1)
    monkeypatch.setattr(vllm_start, "_cuda_capability", lambda index: (7, 0))
    monkeypatch.setattr(
        loader, "load_model_and_tokenizer", lambda *a, **k: pytest.fail("the model was loaded")
    )
    model = art.TrainableModel(
        name="v100", project="p", base_model=str(tiny_model_path), base_path=str(tmp_path)
    )
    backend = art.LocalBackend(options=RuntimeOptions(engine="vllm", dtype="bfloat16", device="cuda"))
    with pytest.raises(ValueError, match="dtype=bfloat16: the vllm engine cannot serve it"):
        await model.register(backend)
    await backend.close()
