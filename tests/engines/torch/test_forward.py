"""The compact forward matches Hugging Face's logits (prefill, decode with per-row positions, rope types)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

torch = pytest.importorskip("torch")

from art.engines.torch.kv_cache import SlotKVCache  # noqa: E402
from art.engines.torch.llama_forward import LlamaForward, LlamaWeights  # noqa: E402


@pytest.fixture(autouse=True)
def _one_thread() -> None:
    torch.set_num_threads(1)


def _load(path: Path) -> Any:
    from transformers import AutoModelForCausalLM

    return AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32).eval()


def _engine_parts(model: Any, compile_kernels: bool = False) -> tuple[LlamaForward, SlotKVCache]:
    weights = LlamaWeights.from_hf(model)
    forward = LlamaForward(weights, model.config, max_positions=256, compile_kernels=compile_kernels)
    cache = SlotKVCache(
        num_layers=len(weights.layers),
        num_kv_heads=weights.num_kv_heads,
        head_dim=weights.head_dim,
        max_slots=8,
        max_positions=256,
        dtype=torch.float32,
        device=torch.device("cpu"),
    )
    return forward, cache


def _check_against_hf(model: Any, compile_kernels: bool = False) -> None:
    forward, cache = _engine_parts(model, compile_kernels)
    gen = torch.Generator().manual_seed(0)
    prompts = [torch.randint(0, 400, (n,), generator=gen) for n in (9, 4, 13)]
    tokens = torch.zeros(3, 13, dtype=torch.int64)
    for i, p in enumerate(prompts):
        tokens[i, : len(p)] = p
    lengths = torch.tensor([len(p) for p in prompts])
    with torch.inference_mode():
        cache.ensure(3, 32)
        logits = forward.prefill(tokens, lengths, None, cache, 0)
        for i, p in enumerate(prompts):
            reference = model(p[None]).logits[0, -1]
            assert torch.allclose(logits[i], reference, atol=1e-4), f"prefill row {i}"
        # Two decode steps, every row at its own position.
        sequences = [p.clone() for p in prompts]
        positions = lengths.clone()
        for _ in range(2):
            nxt = torch.randint(0, 400, (3,), generator=gen)
            logits = forward.decode(nxt, positions, int(positions.max()) + 1, None, cache)
            for i in range(3):
                sequences[i] = torch.cat([sequences[i], nxt[i : i + 1]])
                reference = model(sequences[i][None]).logits[0, -1]
                assert torch.allclose(logits[i], reference, atol=1e-4), f"decode row {i}"
            positions += 1
    assert (forward.decode_attention.kernel == "cpp") == compile_kernels


@pytest.mark.parametrize("compile_kernels", [False, True], ids=["eager", "compiled"])
def test_llama_matches_hf(tiny_model_path: Path, compile_kernels: bool) -> None:
    _check_against_hf(_load(tiny_model_path), compile_kernels)


def test_qwen2_with_attention_bias_matches_hf(tiny_qwen2_path: Path) -> None:
    model = _load(tiny_qwen2_path)
    assert model.model.layers[0].self_attn.q_proj.bias is not None
    _check_against_hf(model)


def _tiny_from_config(config: Any) -> Any:
    from transformers import AutoModelForCausalLM

    torch.manual_seed(0)
    return AutoModelForCausalLM.from_config(config, dtype=torch.float32).eval()


def test_llama3_rope_scaling_matches_hf() -> None:
    from transformers import LlamaConfig

    config = LlamaConfig(
        vocab_size=400,
        hidden_size=64,
        intermediate_size=96,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=256,
        rope_parameters={
            "rope_type": "llama3",
            "rope_theta": 500000.0,
            "factor": 8.0,
            "low_freq_factor": 1.0,
            "high_freq_factor": 4.0,
            "original_max_position_embeddings": 16,
        },
    )
    _check_against_hf(_tiny_from_config(config))


def test_qwen3_qk_norm_matches_hf() -> None:
    from transformers import Qwen3Config

    config = Qwen3Config(
        vocab_size=400,
        hidden_size=64,
        intermediate_size=96,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=16,
        max_position_embeddings=256,
    )
    _check_against_hf(_tiny_from_config(config))


def test_unsupported_architecture_and_rope_are_refused_by_name() -> None:
    from transformers import GPT2Config, LlamaConfig

    gpt2 = _tiny_from_config(GPT2Config(vocab_size=100, n_embd=32, n_layer=1, n_head=2))
    with pytest.raises(ValueError, match=r"gpt2.*supported: llama, mistral, qwen2, qwen3"):
        LlamaWeights.from_hf(gpt2)
    config = LlamaConfig(
        vocab_size=100,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=1,
        num_attention_heads=2,
        rope_parameters={"rope_type": "dynamic", "rope_theta": 10000.0, "factor": 2.0},
    )
    model = _tiny_from_config(config)
    with pytest.raises(ValueError, match=r"'dynamic'.*supported: default, linear, llama3, yarn"):
        LlamaForward(LlamaWeights.from_hf(model), model.config, max_positions=64)


def test_weights_are_references_and_survive_peft_wrapping(tiny_model_path: Path) -> None:
    from peft import LoraConfig, get_peft_model

    model = _load(tiny_model_path)
    weights = LlamaWeights.from_hf(model)
    q_before = model.model.layers[0].self_attn.q_proj.weight
    assert weights.layers[0].proj["q_proj"] is q_before
    assert weights.lm_head is weights.embed  # tied embeddings: one tensor
    peft_model = get_peft_model(model, LoraConfig(r=4, target_modules=["q_proj", "v_proj"]))
    wrapped = peft_model.base_model.model.model.layers[0].self_attn.q_proj
    assert wrapped.base_layer.weight is q_before
    rewrapped = LlamaWeights.from_hf(peft_model.base_model.model)
    assert rewrapped.layers[0].proj["q_proj"] is q_before


def test_fused_groups_share_memory_with_hf_and_follow_replaced_weights(tiny_model_path: Path) -> None:
    model = _load(tiny_model_path)
    weights = LlamaWeights.from_hf(model)
    attn = model.model.layers[0].self_attn
    fused = weights.layers[0].fused["qkv"]
    assert fused.data_ptr() == attn.q_proj.weight.data_ptr()  # one copy: HF's q/k/v are views of it
    assert torch.equal(fused[: attn.q_proj.out_features], attn.q_proj.weight)
    forward = LlamaForward(weights, model.config, max_positions=64)
    tokens, lengths = torch.tensor([[5, 6, 7, 8]]), torch.tensor([4])
    with torch.inference_mode():
        before = forward.logits(forward.score_hidden(tokens, lengths, None))
        reference = model(tokens).logits[0]
        assert torch.allclose(before[0], reference, atol=1e-4)
    with torch.no_grad():  # something replaces a parameter's storage, as model.to(...) would
        attn.k_proj.weight.data = attn.k_proj.weight.data.clone() * 2
    with torch.inference_mode():
        after = forward.logits(forward.score_hidden(tokens, lengths, None))
        assert torch.allclose(after[0], model(tokens).logits[0], atol=1e-4)
        assert not torch.allclose(after, before, atol=1e-3)


def test_packed_bf16_weights_give_the_plain_matmul_results(tiny_model_path: Path) -> None:
    """oneDNN's prepacked weights compute the plain matmul's numbers. Bit for bit on every kernel profile
    measured here (AMX, AVX-512 BF16 with MKL's AVX2 path, AVX-512, AVX2: difference 0), but nothing
    guarantees a packed kernel sums in the plain one's order, so the bound is two bf16 roundings of the
    largest logit (a misplaced or transposed packed weight moves logits by their own size)."""
    from art.kernels import packed_linear

    if not packed_linear.packing_works(torch.bfloat16):
        pytest.skip("this CPU/torch build cannot pack bf16 weights for oneDNN (the engine then doesn't)")
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(tiny_model_path, dtype=torch.bfloat16).eval()
    weights = LlamaWeights.from_hf(model)
    packed = LlamaForward(weights, model.config, max_positions=64)
    plain = LlamaForward(weights, model.config, max_positions=64, pack_weights=False)
    assert packed.pack_weights and not plain.pack_weights
    gen = torch.Generator().manual_seed(1)
    tokens = torch.randint(0, 400, (3, 11), generator=gen)
    lengths = torch.tensor([11, 7, 3])
    with torch.inference_mode():
        a = packed.logits(packed.score_hidden(tokens, lengths, None))
        b = plain.logits(plain.score_hidden(tokens, lengths, None))
    two_roundings = 2 * torch.finfo(torch.bfloat16).eps * float(b.float().abs().max())
    assert float((a.float() - b.float()).abs().max()) <= two_roundings


def test_decode_with_every_cpp_kernel_matches_hf(tmp_path: Path) -> None:
    """A head size of 32 lets the decode step use all C++ kernels (rope + cache write included)."""
    from art.testing.tiny_model import make_tiny_model

    path = make_tiny_model(
        tmp_path / "wide", hidden_size=128, num_heads=4, num_kv_heads=2, intermediate_size=256
    )
    model = _load(path)
    forward, _ = _engine_parts(model, compile_kernels=True)
    assert forward.fast_kernels() and forward._fast_rope()
    _check_against_hf(model, compile_kernels=True)


def test_prefill_after_a_cached_prefix_equals_the_whole_prefill(tiny_model_path: Path) -> None:
    """A prefix computed once and copied to every row (`start`) gives each prompt's logits and cache as if
    the whole prompt had run, and the decode after it agrees with Hugging Face."""
    model = _load(tiny_model_path)
    forward, cache = _engine_parts(model)
    gen = torch.Generator().manual_seed(1)
    prefix = torch.randint(0, 400, (11,), generator=gen)
    rests = [torch.randint(0, 400, (n,), generator=gen) for n in (3, 1, 6)]
    prompts = [torch.cat([prefix, r]) for r in rests]
    lengths = torch.tensor([len(p) for p in prompts])
    whole = torch.zeros(3, int(lengths.max()), dtype=torch.int64)
    rest = torch.zeros(3, max(len(r) for r in rests), dtype=torch.int64)
    for i, (p, r) in enumerate(zip(prompts, rests, strict=True)):
        whole[i, : len(p)], rest[i, : len(r)] = p, r
    with torch.inference_mode():
        cache.ensure(6, 32)
        expected = forward.prefill(whole, lengths, None, cache, 0)  # slots 0-2: the whole prompts
        forward.prefill(prefix[None], torch.tensor([len(prefix)]), None, cache, 3)  # slot 3: the prefix
        cache.share(3, [4, 5], len(prefix))
        got = forward.prefill(rest, lengths - len(prefix), None, cache, 3, start=len(prefix))
        assert torch.allclose(got, expected, atol=1e-5)
        for i, p in enumerate(prompts):
            assert torch.allclose(got[i], model(p[None]).logits[0, -1], atol=1e-4)
            for kv in (cache.keys_LSHTD, cache.values_LSHTD):
                assert torch.allclose(kv[:, 3 + i, :, : len(p)], kv[:, i, :, : len(p)], atol=1e-5)
        nxt = torch.tensor([5, 6, 7])
        stepped = forward.decode(nxt, lengths, int(lengths.max()) + 1, None, _slots_from(cache, 3))
        for i, p in enumerate(prompts):
            reference = model(torch.cat([p, nxt[i : i + 1]])[None]).logits[0, -1]
            assert torch.allclose(stepped[i], reference, atol=1e-4)


def _slots_from(cache: SlotKVCache, first: int) -> SlotKVCache:
    """The same cache with slot `first` as slot 0 (decode runs rows 0..B-1)."""
    view = SlotKVCache(
        num_layers=cache.num_layers,
        num_kv_heads=cache.num_kv_heads,
        head_dim=cache.head_dim,
        max_slots=cache.max_slots,
        max_positions=cache.max_positions,
        dtype=cache.dtype,
        device=cache.device,
    )
    view.keys_LSHTD = cache.keys_LSHTD[:, first:]
    view.values_LSHTD = cache.values_LSHTD[:, first:]
    return view


def test_prefill_start_needs_the_cache_and_share_checks_its_slots(tiny_model_path: Path) -> None:
    forward, cache = _engine_parts(_load(tiny_model_path))
    with pytest.raises(ValueError, match="needs the cache"):
        forward._causal_forward(
            torch.ones(1, 2, dtype=torch.int64), torch.tensor([2]), None, None, 0, fold=False, start=3
        )
    cache.ensure(4, 16)
    with pytest.raises(ValueError, match="among the destinations"):
        cache.share(1, [0, 1, 2], 4)


def test_prefill_with_a_different_cached_length_per_row_equals_the_whole_prefill(
    tiny_model_path: Path,
) -> None:
    """Each row continues its own cached start (kept from an earlier request): the logits and the cache are
    those of the whole prompts, and positions past each row's tokens stay untouched."""
    model = _load(tiny_model_path)
    forward, cache = _engine_parts(model)
    gen = torch.Generator().manual_seed(2)
    prompts = [torch.randint(0, 400, (n,), generator=gen) for n in (14, 6, 9)]
    cached = torch.tensor([11, 0, 5])
    lengths = torch.tensor([len(p) for p in prompts])
    with torch.inference_mode():
        cache.ensure(6, 32)
        whole = torch.zeros(3, int(lengths.max()), dtype=torch.int64)
        for i, p in enumerate(prompts):
            whole[i, : len(p)] = p
        expected = forward.prefill(whole, lengths, None, cache, 0)
        for i, (p, c) in enumerate(zip(prompts, cached.tolist(), strict=True)):
            if c:  # an earlier request left the first c tokens in slot 3 + i
                forward.prefill(p[None, :c], torch.tensor([c]), None, cache, 3 + i)
        sentinel = 12345.0
        for kv in (cache.keys_LSHTD, cache.values_LSHTD):
            kv[:, 3:6, :, 20:] = sentinel
        rest = torch.zeros(3, int((lengths - cached).max()), dtype=torch.int64)
        for i, (p, c) in enumerate(zip(prompts, cached.tolist(), strict=True)):
            rest[i, : len(p) - c] = p[c:]
        got = forward.prefill(rest, lengths - cached, None, cache, 3, start=cached)
        assert torch.allclose(got, expected, atol=1e-5)
        for i, p in enumerate(prompts):
            for kv in (cache.keys_LSHTD, cache.values_LSHTD):
                assert torch.allclose(kv[:, 3 + i, :, : len(p)], kv[:, i, :, : len(p)], atol=1e-5)
                assert bool((kv[:, 3 + i, :, 20:] == sentinel).all())  # padding wrote nothing
