"""Generation with adapters folded into the base matmuls gives the LoRA arithmetic's numbers, row by row."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

torch = pytest.importorskip("torch")

from art.engines.torch.kv_cache import SlotKVCache  # noqa: E402
from art.engines.torch.llama_forward import LlamaForward, LlamaWeights  # noqa: E402
from art.engines.torch.lora import LoraMixer, read_peft_adapter  # noqa: E402


def _parts(path: Path, adapter_paths: list[Path], dtype: Any = torch.float32) -> tuple[Any, ...]:
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(path, dtype=dtype).eval()
    weights = LlamaWeights.from_hf(model)
    folded = LlamaForward(weights, model.config, max_positions=128, fold_adapters=True)
    exact = LlamaForward(weights, model.config, max_positions=128, fold_adapters=False)
    adapters = [
        read_peft_adapter(
            f"m@{i}", p, shapes=weights.linear_shapes(), num_layers=len(weights.layers), dtype=dtype,
            device=torch.device("cpu"),
        )
        for i, p in enumerate(adapter_paths)
    ]  # fmt: skip
    return weights, folded, exact, adapters


def _cache(weights: Any, dtype: Any = torch.float32) -> SlotKVCache:
    return SlotKVCache(
        num_layers=len(weights.layers), num_kv_heads=weights.num_kv_heads, head_dim=weights.head_dim,
        max_slots=8, max_positions=128, dtype=dtype, device=torch.device("cpu"),
    )  # fmt: skip


def _generate(
    forward: LlamaForward, weights: Any, row_adapters: list[Any], dtype: Any = torch.float32
) -> Any:
    """Prefill 9 prompt tokens per row, then 3 decode steps; the logits of every step, [4, B, V]."""
    cache = _cache(weights, dtype)
    lora = LoraMixer(weights.out_sizes()).batch(row_adapters, torch.device("cpu"))
    B = len(row_adapters)
    gen = torch.Generator().manual_seed(3)
    tokens = torch.randint(0, 400, (B, 9), generator=gen)
    out = []
    with torch.inference_mode():
        cache.ensure(B, 16)
        out.append(forward.prefill(tokens, torch.full((B,), 9), lora, cache, 0).clone())
        positions = torch.full((B,), 9)
        for _ in range(3):
            nxt = torch.randint(0, 400, (B,), generator=gen)
            out.append(forward.decode(nxt, positions, int(positions.max()) + 1, lora, cache).clone())
            positions += 1
    return torch.stack(out)


def test_folded_generation_equals_lora_arithmetic_and_leaves_the_base_weights_alone(
    tiny_model_path: Path, adapter_paths: list[Path]
) -> None:
    weights, folded, exact, adapters = _parts(tiny_model_path, adapter_paths)
    before = [{g: t.clone() for g, t in lw.fused.items()} for lw in weights.layers]
    for adapter in adapters:
        a = _generate(folded, weights, [adapter] * 3)
        b = _generate(exact, weights, [adapter] * 3)
        assert torch.allclose(a, b, atol=1e-5), (a - b).abs().max()
        assert not torch.allclose(a, _generate(exact, weights, [None] * 3), atol=1e-2)  # it did change
    assert len(folded._folded) == 2 and len(exact._folded) == 0
    for lw, saved in zip(weights.layers, before, strict=True):
        assert all(torch.equal(lw.fused[g], saved[g]) for g in saved)


def test_in_bf16_folding_gives_the_same_numbers_as_the_lora_arithmetic(
    tiny_model_path: Path, adapter_paths: list[Path]
) -> None:
    """Folding computes the very same dot products, so unlike merging W + BA (which rounds the sum to bf16)
    it does not move the served logprobs away from the trainer's."""
    weights, folded, exact, adapters = _parts(tiny_model_path, adapter_paths, torch.bfloat16)
    a = _generate(folded, weights, [adapters[0]] * 2, torch.bfloat16).log_softmax(-1)
    b = _generate(exact, weights, [adapters[0]] * 2, torch.bfloat16).log_softmax(-1)
    assert (a - b).abs().max() < 1e-3


def test_each_row_of_a_mixed_batch_equals_its_solo_run(
    tiny_model_path: Path, adapter_paths: list[Path]
) -> None:
    weights, folded, _, adapters = _parts(tiny_model_path, adapter_paths)
    rows = [adapters[1], None, adapters[0], adapters[1]]
    mixed = _generate(folded, weights, rows)
    for i, adapter in enumerate(rows):
        solo = _generate(folded, weights, [adapter] * len(rows))[:, i]
        assert torch.allclose(mixed[:, i], solo, atol=1e-5), f"row {i}"


def test_more_adapters_than_copies_are_served_unfolded(
    tiny_model_path: Path, adapter_paths: list[Path]
) -> None:
    weights, folded, exact, adapters = _parts(tiny_model_path, adapter_paths)
    folded._folded.capacity = 1
    rows = [adapters[0], adapters[1]]
    assert torch.allclose(_generate(folded, weights, rows), _generate(exact, weights, rows), atol=1e-5)
    assert len(folded._folded) == 0  # nothing was folded for a batch that needs two copies


async def test_unloading_an_adapter_frees_its_folded_weights(engine: Any, adapter_paths: list[Path]) -> None:
    from art.engines.base import GenerateRequest, SamplingParams

    engine.load_adapter("tiny@7", adapter_paths[0])
    request = GenerateRequest(
        model="tiny@7", prompt_token_ids=[1, 40, 41], sampling=SamplingParams(max_tokens=3)
    )
    async for _ in engine.generate(request):
        pass
    copies = engine._forward._folded
    count = len(copies)
    assert count >= 1
    engine.unload_adapter("tiny@7")
    assert len(copies) == count - 1


def test_unfolded_mixed_batch_with_every_cpp_kernel_equals_the_torch_path(tmp_path: Path) -> None:
    """More adapters than folded copies, with the C++ decode kernels (head size 32), against pure torch."""
    from transformers import AutoModelForCausalLM

    from art.engines.torch.random_adapter import save_random_adapter
    from art.testing.tiny_model import make_tiny_model

    path = make_tiny_model(
        tmp_path / "wide", hidden_size=128, num_heads=4, num_kv_heads=2, intermediate_size=256
    )
    paths = [save_random_adapter(path, tmp_path / f"a{i}", seed=i, scale=0.5) for i in range(2)]
    model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32).eval()
    weights = LlamaWeights.from_hf(model)
    fast = LlamaForward(weights, model.config, max_positions=128, compile_kernels=True)
    torch_ops = LlamaForward(
        weights, model.config, max_positions=128, compile_kernels=False, fold_adapters=False
    )
    fast._folded.capacity = 1
    assert fast.fast_kernels() and fast._fast_rope()
    adapters = [
        read_peft_adapter(
            f"m@{i}", p, shapes=weights.linear_shapes(), num_layers=len(weights.layers), dtype=torch.float32,
            device=torch.device("cpu"),
        )
        for i, p in enumerate(paths)
    ]  # fmt: skip
    rows = [adapters[0], None, adapters[1], adapters[0]]
    assert torch.allclose(_generate(fast, weights, rows), _generate(torch_ops, weights, rows), atol=1e-4)


def test_decode_kernels_adding_the_lora_b_product_in_place_change_no_bit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """bf16, every row on one folded adapter: the C++ kernels that add each group's B product as they read
    it (rope, SwiGLU, add + RMSNorm) give exactly the logits of lora_b_add followed by those kernels."""
    from transformers import AutoModelForCausalLM

    from art.engines.torch import folded_lora
    from art.engines.torch.random_adapter import save_random_adapter
    from art.testing.tiny_model import make_tiny_model

    path = make_tiny_model(
        tmp_path / "wide", hidden_size=128, num_heads=4, num_kv_heads=2, intermediate_size=256
    )
    adapter_path = save_random_adapter(path, tmp_path / "a", seed=1, scale=0.5)
    model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.bfloat16).eval()
    weights = LlamaWeights.from_hf(model)
    forward = LlamaForward(weights, model.config, max_positions=128, compile_kernels=True)
    assert forward.fast_kernels() and forward._fast_rope()
    adapter = read_peft_adapter(
        "m@1", adapter_path, shapes=weights.linear_shapes(), num_layers=len(weights.layers),
        dtype=torch.bfloat16, device=torch.device("cpu"),
    )  # fmt: skip
    calls = {"fused": 0}
    fused_bt = folded_lora.FoldedGroup.fused_bt.fget
    assert fused_bt is not None

    def counting(self: Any) -> Any:
        bt = fused_bt(self)
        calls["fused"] += bt is not None
        return bt

    monkeypatch.setattr(folded_lora.FoldedGroup, "fused_bt", property(counting))
    rows = [adapter] * 3
    fused = _generate(forward, weights, rows, torch.bfloat16)
    assert calls["fused"] >= 3 * 4 * len(weights.layers)  # 3 decode steps x 4 groups x layers took it
    monkeypatch.setattr(folded_lora.FoldedGroup, "fused_bt", property(lambda self: None))
    separate = _generate(forward, weights, rows, torch.bfloat16)
    assert torch.equal(fused, separate)
    assert not torch.equal(
        fused, _generate(forward, weights, [None] * 3, torch.bfloat16)
    )  # the adapter counts
