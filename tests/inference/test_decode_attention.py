"""The decode attention (one query per row over the KV cache) equals SDPA, compiled or eager."""

from __future__ import annotations

import logging

import pytest

torch = pytest.importorskip("torch")
F = torch.nn.functional

from art.inference import decode_attention as da  # noqa: E402


def _case(dtype: object, rows: int = 5, heads: int = 6, kv_heads: int = 2, length: int = 37) -> tuple:
    """Inputs laid out as the engine has them: keys/values are views into a larger slot cache."""
    gen = torch.Generator().manual_seed(0)
    d = 16
    q = torch.randn(rows, heads, 1, d, generator=gen).to(dtype)
    cache_k = torch.randn(rows + 3, kv_heads, length + 20, d, generator=gen).to(dtype)
    cache_v = torch.randn(rows + 3, kv_heads, length + 20, d, generator=gen).to(dtype)
    lengths = torch.randint(1, length + 1, (rows,), generator=gen)
    lengths[0] = length
    allowed = torch.arange(length)[None, :] < lengths[:, None]
    mask = torch.zeros(rows, 1, 1, length).masked_fill_(~allowed[:, None, None], float("-inf"))
    return q, cache_k[:rows, :, :length], cache_v[:rows, :, :length], mask, d**-0.5


def _sdpa(q, k, v, mask, scale):  # type: ignore[no-untyped-def]
    return F.scaled_dot_product_attention(
        q.float(), k.float(), v.float(), attn_mask=mask, scale=scale, enable_gqa=True
    )


@pytest.mark.parametrize("kv_heads", [1, 2, 6])
def test_eager_attention_equals_sdpa_with_grouped_heads_and_padding(kv_heads: int) -> None:
    q, k, v, mask, scale = _case(torch.float32, kv_heads=kv_heads)
    out = da.attention_eager(q, k, v, mask, scale)
    assert out.shape == q.shape
    assert torch.allclose(out, _sdpa(q, k, v, mask, scale), atol=1e-5)


def test_compiled_attention_is_checked_and_equals_sdpa_for_one_and_many_rows() -> None:
    attention = da.DecodeAttention(compile=True)
    with torch.inference_mode():
        for rows in (1, 7):  # dynamo treats a batch of one as its own shape
            for dtype, atol in ((torch.float32, 1e-5), (torch.bfloat16, 2e-2)):
                q, k, v, mask, scale = _case(dtype, rows=rows, length=23 + rows)
                out = attention(q, k, v, mask, scale)
                assert out.dtype == dtype
                assert torch.allclose(out.float(), _sdpa(q, k, v, mask, scale), atol=atol)
    assert attention.compiled  # this machine has a C++ compiler: the compiled kernel is in use


def test_a_failing_compiler_falls_back_to_eager_and_says_so(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    def broken() -> None:
        raise RuntimeError("no C++ compiler found")

    monkeypatch.setattr(da, "_compiled_kernel", broken)
    attention = da.DecodeAttention(compile=True)
    q, k, v, mask, scale = _case(torch.float32)
    with caplog.at_level(logging.WARNING, logger="art.inference.decode_attention"):
        out = attention(q, k, v, mask, scale)
    assert not attention.compiled
    assert "no C++ compiler found" in caplog.text and "using eager" in caplog.text
    assert torch.allclose(out, _sdpa(q, k, v, mask, scale), atol=1e-5)


def test_compile_setting(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ART_ENGINE_COMPILE", raising=False)
    assert da.compile_wanted(torch.device("cpu"))
    assert not da.compile_wanted(torch.device("cuda"))
    monkeypatch.setenv("ART_ENGINE_COMPILE", "0")
    assert not da.compile_wanted(torch.device("cpu"))
