"""Engines and adapters over the session's tiny models, shared by the inference tests."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest


@pytest.fixture(scope="module")
def engine(tiny_model_path: Path) -> Iterator[Any]:
    """A float32 TorchEngine over the tiny Llama, served as "tiny" (float32: exact comparisons)."""
    import torch

    from art.engines.torch.torch_engine import TorchEngine

    torch.set_num_threads(1)
    eng = TorchEngine.from_pretrained(
        str(tiny_model_path), served_name="tiny", dtype="float32", num_threads=1
    )
    yield eng
    asyncio.run(eng.close())


@pytest.fixture(scope="session")
def adapter_paths(tiny_model_path: Path, tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    """Two random LoRA adapters (different seeds and ranks) for the tiny Llama."""
    from art.engines.torch.random_adapter import save_random_adapter

    root = tmp_path_factory.mktemp("adapters")
    return [
        save_random_adapter(tiny_model_path, root / "a", seed=1, rank=8),
        save_random_adapter(
            tiny_model_path, root / "b", seed=2, rank=4, targets=["q_proj", "v_proj", "down_proj"]
        ),
    ]
