"""The decode attention (one query per row over the KV cache) equals SDPA, whichever kernel runs it."""

from __future__ import annotations

import logging

import pytest

torch = pytest.importorskip("torch")
F = torch.nn.functional

from art.engines.torch import decode_attention as da  # noqa: E402
from art.kernels import cpp_kernels  # noqa: E402


def _case(
    dtype: object, rows: int = 5, heads: int = 6, kv_heads: int = 2, length: int = 37, d: int = 32
) -> tuple:
    """Inputs laid out as the engine has them: q a slice of the fused projection, keys/values views into a
    larger slot cache, rows of different lengths."""
    gen = torch.Generator().manual_seed(0)
    q = torch.randn(rows, 1, heads + kv_heads, d, generator=gen).to(dtype)[:, :, :heads].transpose(1, 2)
    cache_k = torch.randn(rows + 3, kv_heads, length + 20, d, generator=gen).to(dtype)
    cache_v = torch.randn(rows + 3, kv_heads, length + 20, d, generator=gen).to(dtype)
    lengths = torch.randint(1, length + 1, (rows,), generator=gen)
    lengths[0] = length
    return q, cache_k[:rows, :, :length], cache_v[:rows, :, :length], lengths, d**-0.5


def _sdpa(q, k, v, lengths, scale):  # type: ignore[no-untyped-def]
    mask = da.length_mask(lengths, k.shape[2])
    return F.scaled_dot_product_attention(
        q.float(), k.float(), v.float(), attn_mask=mask, scale=scale, enable_gqa=True
    )


@pytest.mark.parametrize("kv_heads", [1, 2, 6])
def test_eager_attention_equals_sdpa_with_grouped_heads_and_padding(kv_heads: int) -> None:
    q, k, v, lengths, scale = _case(torch.float32, kv_heads=kv_heads)
    out = da.attention_eager(q, k, v, da.length_mask(lengths, k.shape[2]), scale)
    assert out.shape == q.shape
    assert torch.allclose(out, _sdpa(q, k, v, lengths, scale), atol=1e-5)


@pytest.mark.parametrize("kv_heads", [1, 2, 6])
@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "float16"])
def test_cpp_kernel_equals_sdpa_and_ignores_positions_beyond_each_length(kv_heads: int, dtype: str) -> None:
    q, k, v, lengths, scale = _case(getattr(torch, dtype), kv_heads=kv_heads)
    expected = _sdpa(q, k, v, lengths, scale)
    k[1, :, int(lengths[1]) :] = float("nan")  # never read: beyond row 1's length
    out = cpp_kernels.attention(q, k, v, lengths, scale)
    assert out.dtype == q.dtype and out.shape == q.shape
    atol = 1e-5 if dtype == "float32" else 2e-2
    assert torch.allclose(out.float(), expected, atol=atol)


@pytest.mark.parametrize(
    ("heads", "kv_heads", "d"),
    [(9, 3, 64), (14, 2, 64), (8, 1, 128), (18, 2, 128), (10, 2, 80), (12, 12, 48)],
    ids=["smollm2", "qwen2.5", "groups-of-8", "groups-of-9", "head-80", "head-48"],
)
@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_cpp_kernel_equals_sdpa_for_the_head_layouts_of_real_models(
    heads: int, kv_heads: int, d: int, dtype: str
) -> None:
    """Head groups of 1-8 with head sizes 64 and 128 run loops compiled for their shape, the rest a general
    one; lengths across several 16-position blocks, with a partial block at the end."""
    q, k, v, lengths, scale = _case(
        getattr(torch, dtype), rows=4, heads=heads, kv_heads=kv_heads, length=70, d=d
    )
    expected = _sdpa(q, k, v, lengths, scale)
    k[1, :, int(lengths[1]) :] = float("nan")
    v[1, :, int(lengths[1]) :] = float("nan")
    out = cpp_kernels.attention(q, k, v, lengths, scale)
    atol = 1e-5 if dtype == "float32" else 2e-2
    assert torch.allclose(out.float(), expected, atol=atol)


@pytest.mark.parametrize("kernel", ["cpp", "inductor"])
def test_the_chosen_kernel_is_checked_and_equals_sdpa_for_one_and_many_rows(
    kernel: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    if kernel == "inductor":  # as on a machine where the C++ kernel cannot be built
        monkeypatch.setattr(cpp_kernels, "supported", lambda *a: False)
    attention = da.DecodeAttention(compile=True)
    with torch.inference_mode():
        for rows in (1, 7):  # dynamo treats a batch of one as its own shape
            for dtype, atol in ((torch.float32, 1e-5), (torch.bfloat16, 2e-2)):
                q, k, v, lengths, scale = _case(dtype, rows=rows, length=23 + rows)
                out = attention(q, k, v, lengths, scale)
                assert out.dtype == dtype
                assert torch.allclose(out.float(), _sdpa(q, k, v, lengths, scale), atol=atol)
    assert attention.kernel == kernel  # this machine has a C++ compiler: the fastest kernel is in use


def test_a_failing_compiler_falls_back_to_eager_and_says_so(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    def broken(*args: object) -> None:
        raise RuntimeError("no C++ compiler found")

    monkeypatch.setattr(da, "_compiled_kernel", broken)
    monkeypatch.setattr(cpp_kernels, "_kernel", broken)
    attention = da.DecodeAttention(compile=True)
    q, k, v, lengths, scale = _case(torch.float32)
    with caplog.at_level(logging.WARNING, logger="art.engines.torch.decode_attention"):
        out = attention(q, k, v, lengths, scale)
    assert attention.kernel == "eager"
    assert (
        caplog.text.count("no C++ compiler found") == 2 and "using the eager decode attention" in caplog.text
    )
    assert torch.allclose(out, _sdpa(q, k, v, lengths, scale), atol=1e-5)


def test_compile_setting() -> None:
    assert da.compile_wanted(torch.device("cpu"))
    assert not da.compile_wanted(torch.device("cuda"))
    assert not da.compile_wanted(torch.device("cpu"), "off")
    assert da.compile_wanted(torch.device("cuda"), "on")
    assert da.DecodeAttention(compile=False).kernel == "eager"
