"""The training attention (matmuls + C++ causal softmax) computes what SDPA computes, forward and backward."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
F = torch.nn.functional

from art.kernels import cpp_kernels  # noqa: E402
from art.training import causal_attention as ca  # noqa: E402


def test_on_by_default_and_sdpa_when_turned_off() -> None:
    assert ca.kernels_apply(*_inputs(torch.float32))
    assert not ca.kernels_apply(*_inputs(torch.float32), enabled=False)
    q, k, v = _inputs(torch.float32)
    assert ca.attention(q, k, v, 0.3, kernels=False).grad_fn.name().startswith(("ScaledDotProduct", "Sdpa"))


def test_backward_keeps_nothing_of_size_t_squared() -> None:
    """Only q, k and v are saved (P is recomputed): the memory of SDPA's saved inputs, not B x H x T^2."""
    q, k, v = _inputs(torch.float32, T=64)
    out = ca.attention(q, k, v, 0.3)
    saved = out.grad_fn.saved_tensors
    assert sorted(t.numel() for t in saved) == sorted([q.numel(), k.numel(), v.numel()])


def _inputs(dtype: object, B: int = 2, H: int = 6, K: int = 2, T: int = 37, D: int = 32) -> list:
    gen = torch.Generator().manual_seed(0)
    shapes = ((B, H, T, D), (B, K, T, D), (B, K, T, D))
    return [torch.randn(*s, generator=gen).to(dtype).requires_grad_() for s in shapes]


def _run(fn, inputs: list, grad: object) -> tuple:  # type: ignore[no-untyped-def]
    out = fn(*inputs)
    out.backward(grad.to(out.dtype))
    return (out.detach().float(), *(x.grad.float() for x in inputs))


def _sdpa(q, k, v, scale=0.3):  # type: ignore[no-untyped-def]
    return F.scaled_dot_product_attention(
        q, k, v, is_causal=True, scale=scale, enable_gqa=q.shape[1] != k.shape[1]
    )


@pytest.mark.parametrize("kv_heads", [1, 2, 6])
def test_float32_output_and_gradients_equal_sdpa(kv_heads: int) -> None:
    inputs = _inputs(torch.float32, K=kv_heads)
    assert ca.kernels_apply(*inputs)
    grad = torch.randn(2, 6, 37, 32, generator=torch.Generator().manual_seed(1))
    ours = _run(lambda q, k, v: ca.attention(q, k, v, 0.3), inputs, grad)
    reference = _run(_sdpa, _inputs(torch.float32, K=kv_heads), grad)
    for name, a, b in zip(("out", "dq", "dk", "dv"), ours, reference, strict=True):
        assert torch.allclose(a, b, atol=1e-5, rtol=1e-4), (name, (a - b).abs().max().item())


def test_bf16_is_as_close_to_float32_as_sdpa_in_bf16() -> None:
    """Rounded scores (as Hugging Face's eager attention) cost no more accuracy than SDPA's bf16 kernel."""
    grad = torch.randn(2, 9, 70, 64, generator=torch.Generator().manual_seed(1))
    shape = {"B": 2, "H": 9, "K": 3, "T": 70, "D": 64}
    exact = _run(_sdpa, _inputs(torch.float32, **shape), grad)
    ours = _run(lambda q, k, v: ca.attention(q, k, v, 0.3), _inputs(torch.bfloat16, **shape), grad)
    sdpa = _run(_sdpa, _inputs(torch.bfloat16, **shape), grad)
    for name, a, s, e in zip(("out", "dq", "dk", "dv"), ours, sdpa, exact, strict=True):
        ours_err, sdpa_err = ((a - e).norm() / e.norm()).item(), ((s - e).norm() / e.norm()).item()
        assert ours_err < 0.02 and ours_err <= 2 * sdpa_err, (name, ours_err, sdpa_err)


def test_right_padding_never_reaches_real_positions() -> None:
    """Positions after a row's last real token (padding) change nothing before them, forward or backward."""
    q, k, v = _inputs(torch.float32, T=20)
    out = ca.attention(q, k, v, 0.3)
    q2, k2, v2 = (x.detach().clone() for x in (q, k, v))
    for x in (q2, k2, v2):
        x[:, :, 12:] = 1e4  # garbage in the padding
    out2 = ca.attention(q2, k2, v2, 0.3)
    assert torch.equal(out[:, :, :12], out2[:, :, :12])


def test_long_sequences_and_other_inputs_use_sdpa(monkeypatch: pytest.MonkeyPatch) -> None:
    q, k, v = _inputs(torch.float32)
    assert ca.kernels_apply(q, k, v)
    monkeypatch.setattr(ca, "MAX_SCORES_BYTES", q.shape[0] * q.shape[1] * 37 * 37 * 4 - 1)
    assert not ca.kernels_apply(q, k, v)  # P would exceed the cap: SDPA keeps memory flat
    monkeypatch.undo()
    assert not ca.kernels_apply(q.transpose(2, 3), k, v)  # not contiguous

    def unusable(*_: object, **__: object) -> bool:  # the signature of cpp_kernels.usable
        return False

    monkeypatch.setattr(cpp_kernels, "usable", unusable)
    assert not ca.kernels_apply(q, k, v)  # no C++ compiler here: SDPA, same numbers
    assert torch.allclose(ca.attention(q, k, v, 0.3), _sdpa(q, k, v), atol=1e-6)


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_causal_softmax_kernels_equal_torch(dtype: str) -> None:
    dt = getattr(torch, dtype)
    gen = torch.Generator().manual_seed(0)
    scores = (torch.randn(3, 2, 45, 45, generator=gen) * 4).to(dt).requires_grad_()
    causal = torch.ones(45, 45, dtype=torch.bool).triu(1)
    expected = torch.softmax((scores.float() * 0.25).masked_fill(causal, float("-inf")), -1)
    probs = cpp_kernels.causal_softmax(scores.detach(), 0.25)
    # Measured (largest |error|, the same with AVX-512 BF16 + AMX, AVX-512 BF16 with MKL's AVX2 path, AVX-512
    # and AVX2 kernels): float32 6e-8 forward, 1.5e-8 backward; bf16 1.95e-3 forward (one bf16 rounding of a
    # probability near 0.5) and 4.9e-4 backward, where the largest gradient is 0.157. Each bound is 2-4x the
    # measured error: a backward off by 1% of the largest gradient fails.
    fwd_tol, bwd_tol = (1e-6, 1e-7) if dtype == "float32" else (4e-3, 1.5e-3)
    assert torch.allclose(probs.float(), expected, atol=fwd_tol, rtol=0)
    assert bool((probs.float()[..., causal] == 0).all())
    grad_p = torch.randn(3, 2, 45, 45, generator=gen).to(dt)
    (expected_grad,) = torch.autograd.grad(expected, scores, grad_p.float())
    got = cpp_kernels.causal_softmax_backward(probs, grad_p, 0.25)
    assert float(expected_grad.abs().max()) > 0.1  # the bound is small next to the gradients compared
    assert torch.allclose(got.float(), expected_grad.float(), atol=bwd_tol, rtol=0)
    assert bool((got.float()[..., causal] == 0).all())
