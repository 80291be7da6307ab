"""On a GPU nothing CPU-only runs. No GPU here: the gates are asked about CUDA devices and fake CUDA
tensors (`FakeTensorMode` makes tensors that claim a CUDA device without one), and the service is driven
with a trainer that says it trains on a GPU. What this cannot run is listed in docs/gpu.md."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import torch

from art.engines.torch.decode_attention import compile_wanted
from art.engines.torch.kv_cache import zeros
from art.engines.torch.scheduler import host_lists
from art.kernels import cpp_kernels, packed_linear

CUDA = torch.device("cuda:0")


def _fake_cuda(*shape: int, dtype: torch.dtype = torch.bfloat16) -> torch.Tensor:
    from torch._subclasses.fake_tensor import FakeTensorMode

    with FakeTensorMode(allow_non_fake_inputs=True):
        return torch.empty(*shape, dtype=dtype, device="cuda")


def test_cpu_kernels_packing_and_compiled_decode_stay_off_on_cuda() -> None:
    weight = _fake_cuda(128, 64)
    assert weight.device.type == "cuda"
    for dtype in (torch.bfloat16, torch.float32):
        assert not cpp_kernels.supported(dtype, CUDA, 64)
        assert not cpp_kernels.usable(dtype, CUDA, 64)  # never builds or self-checks the C++ on a GPU
    assert cpp_kernels.supported(torch.float32, torch.device("cpu"), 64)  # the premise: on CPU it would
    assert not packed_linear.should_pack([weight])
    assert not compile_wanted(CUDA)
    assert compile_wanted(torch.device("cpu"))


def test_kv_pages_come_from_an_anonymous_mapping_only_on_cpu() -> None:
    on_meta = zeros((4, 8192), torch.float32, torch.device("meta"))
    assert on_meta.device.type == "meta"  # the torch.zeros path every non-CPU device takes
    on_cpu = zeros((4, 8192), torch.float32, torch.device("cpu"))
    assert on_cpu.untyped_storage().data_ptr() % 4096 == 0 and not on_cpu.any()


def test_one_host_copy_gives_what_tolist_gives() -> None:
    ids = torch.tensor([5, 49151, 0])
    logprobs = torch.tensor([-0.5, -1.25, -30.125])
    stops = torch.tensor([True, False, True])
    top = torch.tensor([[1, 2], [3, 4], [5, 6]])
    tensors = (ids, logprobs, stops, top)
    assert host_lists(*tensors, one_copy=True) == host_lists(*tensors, one_copy=False)
    assert host_lists(*tensors, one_copy=True) == [t.tolist() for t in tensors]


@dataclass
class _Report:
    updated: bool = False
    message: str = "nothing trainable"
    metrics: dict[str, float] = field(default_factory=dict)


class _Trainer:
    vocab_size = 8

    def train_step(self, *_: Any, **__: Any) -> _Report:
        return _Report()


class _Engine:
    async def pause(self) -> None: ...
    async def resume(self) -> None: ...
    def release_idle_cache(self) -> int:
        return 0

    async def run(self, fn: Any) -> Any:
        return fn()


@pytest.mark.parametrize("on_cpu", [True, False])
async def test_memory_goes_back_to_the_os_after_a_step_only_on_cpu(
    on_cpu: bool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from art.record.storage import ModelStorage
    from art.service import service as service_module
    from art.types import LoRAConfig, RuntimeOptions, TrainSpec

    calls: list[str] = []
    monkeypatch.setattr(service_module, "release_if_short", lambda setting: calls.append(setting) or True)
    storage = ModelStorage(base_path=tmp_path, project="p", name="m")
    svc = service_module.ModelService(
        "m",
        storage,
        service_module.ServiceConfig("base", LoRAConfig(), RuntimeOptions(release_memory="always")),
    )
    svc.engine, svc.trainer, svc._on_cpu = _Engine(), _Trainer(), on_cpu  # type: ignore[assignment]

    async def canary(step: int, **_: Any) -> tuple[dict[str, float], list[float]]:
        return {}, []

    # The rest of the step (save, load, check, publish) is not what this test is about.
    monkeypatch.setattr(svc, "_save_checkpoint", lambda *a, **k: None)
    monkeypatch.setattr(svc, "_load_into_engine", lambda step: None)
    monkeypatch.setattr(svc, "_canary", canary)
    monkeypatch.setattr(svc, "_publish", lambda step: setattr(svc, "step", step))
    result = await svc.train([], TrainSpec(), progress=False)
    assert result.step == 1  # nothing trainable still makes a step, as in the reference
    assert calls == (["always"] if on_cpu else [])
    assert result.metrics["memory_released"] == (1.0 if on_cpu else 0.0)
