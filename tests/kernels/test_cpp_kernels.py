"""The C++ kernels give the numbers of the torch ops they replace (bit for bit where no sum is reordered)."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
F = torch.nn.functional

from art.engines.torch.llama_forward import rms_norm  # noqa: E402
from art.engines.torch.rope import apply_rope, signed_sin  # noqa: E402
from art.kernels import cpp_kernels  # noqa: E402

DTYPES = ["float32", "bfloat16", "float16"]


def _rand(*shape: int, dtype: str, seed: int = 0, scale: float = 1.0):  # type: ignore[no-untyped-def]
    gen = torch.Generator().manual_seed(seed)
    return (torch.randn(*shape, generator=gen) * scale).to(getattr(torch, dtype))


def _ulps(a, b):  # type: ignore[no-untyped-def]
    """Largest difference in units of the last place of `b`'s dtype, relative to |b|."""
    eps = torch.finfo(b.dtype).eps
    return ((a.float() - b.float()).abs() / (b.float().abs() * eps + 1e-30)).max().item()


@pytest.mark.parametrize("dtype", DTYPES)
def test_add_rms_norm_equals_residual_add_then_hf_rms_norm(dtype: str) -> None:
    x, y = _rand(7, 3, 96, dtype=dtype, seed=1), _rand(7, 3, 96, dtype=dtype, seed=2)
    w = _rand(96, dtype=dtype, seed=3)
    s, h = cpp_kernels.add_rms_norm(x, y, w, 1e-5)
    assert torch.equal(s, x + y)  # one rounding, like torch's add
    reference = rms_norm(x + y, w, 1e-5)
    assert _ulps(h, reference) <= 1.01 if dtype != "float32" else torch.allclose(h, reference, atol=1e-5)
    s2, h2 = cpp_kernels.add_rms_norm(x, None, w, 1e-5)  # no residual: s is x itself
    # measured on every kernel profile: float32 4.8e-7 at most (2.3 ulps), bf16 and float16 0 ulps
    no_residual = rms_norm(x, w, 1e-5)
    assert s2 is x
    assert (
        _ulps(h2, no_residual) <= 1.01 if dtype != "float32" else torch.allclose(h2, no_residual, atol=5e-6)
    )


@pytest.mark.parametrize("dtype", DTYPES)
def test_swiglu_equals_silu_times_up(dtype: str) -> None:
    gate_up = _rand(5, 2 * 48, dtype=dtype, scale=4.0)
    out = cpp_kernels.swiglu(gate_up)
    gate, up = gate_up.chunk(2, dim=-1)
    reference = F.silu(gate).mul_(up)
    assert out.shape == reference.shape
    if dtype == "float32":
        assert torch.allclose(out, reference, atol=1e-5, rtol=1e-5)
    else:
        assert _ulps(out, reference) <= 1.01


def test_bf16_results_have_torchs_bits_even_for_denormals_nans_and_infinities() -> None:
    """Where the CPU has AVX-512 BF16 the kernels round to bf16 with its instruction, which flushes denormals
    to zero and writes NaNs its own way; vectors holding such values take ATen's conversion instead, so every
    bit is what torch's own bf16 ops store (here: the residual sum, as `x + y`)."""
    tiny = torch.finfo(torch.float32).tiny  # the smallest normal float
    x, y = _rand(4, 64, dtype="float32", seed=1), _rand(4, 64, dtype="float32", seed=2)
    x[0, :16] = tiny * 0.75
    y[0, :16] = tiny * (-1.0 + torch.arange(16) / 16)  # sums of either sign below the smallest normal
    x[1, 3], x[2, 5], x[3, 40] = float("nan"), float("inf"), float("-inf")
    xb, yb = x.bfloat16(), y.bfloat16()
    s, h = cpp_kernels.add_rms_norm(xb, yb, _rand(64, dtype="bfloat16"), 1e-5)
    reference = xb + yb
    denormal = reference[0, :16].float()
    assert (denormal != 0).sum() >= 8 and denormal.abs().max() < tiny  # the case is really there
    assert torch.equal(s.view(torch.int16), reference.view(torch.int16))
    assert h[1].isnan().all() and not h[0].isnan().any()


@pytest.mark.parametrize("dtype", DTYPES)
def test_rope_qkv_rotates_and_writes_the_cache_exactly_like_the_torch_path(dtype: str) -> None:
    B, H, K, D, P = 3, 6, 2, 32, 40
    qkv = _rand(B, (H + 2 * K) * D, dtype=dtype)
    angles = torch.arange(P)[:, None] * (1.0 / 10000 ** (torch.arange(0, D, 2) / D))[None]
    emb = torch.cat([angles, angles], -1)
    cos, sin = emb.cos().to(qkv.dtype), emb.sin().to(qkv.dtype)
    ssin = signed_sin(sin)
    positions = torch.tensor([5, 0, 17])
    keys = torch.zeros(B + 2, K, P, D, dtype=qkv.dtype)
    values = torch.zeros_like(keys)
    q = cpp_kernels.rope_qkv(qkv, cos, ssin, positions, keys, values, H)
    x = qkv.view(B, 1, H + 2 * K, D)
    qk = apply_rope(x[:, :, : H + K], cos[positions][:, None, None], ssin[positions][:, None, None])
    assert torch.equal(q[:, :, 0], qk[:, 0, :H])
    rows = torch.arange(B)
    assert torch.equal(keys[rows, :, positions], qk[:, 0, H:])
    assert torch.equal(values[rows, :, positions], x[:, 0, H + K :])
    untouched = torch.ones(P, dtype=torch.bool)
    untouched[[0, 5, 17]] = False
    assert keys[:, :, untouched].abs().sum() == 0 and values[B:].abs().sum() == 0


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize(
    ("rows", "n", "rank"),
    [(8, 64, 24), (13, 208, 8), (37, 400, 24)],  # 4-row tiles and a remainder; 4-vector tiles and
)  # single vectors; the last one big enough to run on several threads
def test_lora_b_add_equals_pefts_y_plus_lora_b_of_h(dtype: str, rows: int, n: int, rank: int) -> None:
    y = _rand(rows, n + rank, dtype=dtype)
    b = _rand(n, rank, dtype=dtype, seed=1, scale=0.2)
    out = cpp_kernels.lora_b_add(y, cpp_kernels.float_lora_bt(b))
    reference = y[..., :n] + F.linear(y[..., n:].contiguous(), b)
    tolerance = 1e-5 if dtype == "float32" else 1e-2
    assert torch.allclose(out.float(), reference.float(), atol=tolerance, rtol=tolerance)


def _block_diagonal_b(outs: list[int], ranks: list[int], dtype: str, seed: int = 1):  # type: ignore[no-untyped-def]
    """B [sum(outs), sum(ranks)] of a folded group: projection i's outputs use only its own ranks (a rank of 0:
    a projection the adapter does not target)."""
    b = torch.zeros(sum(outs), sum(ranks), dtype=getattr(torch, dtype))
    row = col = 0
    for i, (out, rank) in enumerate(zip(outs, ranks, strict=True)):
        b[row : row + out, col : col + rank] = _rand(out, rank, dtype=dtype, seed=seed + i, scale=0.2)
        row, col = row + out, col + rank
    return b


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize(
    ("outs", "ranks"),
    [([96, 32, 32], [8, 8, 8]), ([160, 160], [8, 8]), ([96, 32, 32], [8, 0, 4]), ([64], [0])],
)  # q/k/v, gate/up, a group whose middle projection is not targeted, a B of zeros (a fresh PEFT adapter)
def test_a_folded_groups_block_diagonal_b_skips_its_zeros_and_changes_nothing(
    dtype: str, outs: list[int], ranks: list[int]
) -> None:
    """Only the nonzero blocks of B^T are kept (what each run of columns multiplies), and the sums are the
    same ones bit for bit: the dense B^T the kernels used before gives exactly these outputs."""
    b = _block_diagonal_b(outs, ranks, dtype)
    N, R = b.shape
    bt = cpp_kernels.float_lora_bt(b)
    assert bt.blocks.numel() == max(1, sum(o * r for o, r in zip(outs, ranks, strict=True)))
    dense = cpp_kernels.LoraBT(
        b.t().float().contiguous().reshape(-1), torch.tensor([[0, N, 0, R]]), R, N
    )  # one run of all columns and all ranks: the dense arithmetic
    for rows in (3, 37):
        y = _rand(rows, N + R, dtype=dtype, seed=rows)
        out = cpp_kernels.lora_b_add(y, bt)
        assert torch.equal(out, cpp_kernels.lora_b_add(y, dense))
        reference = y[..., :N] + F.linear(y[..., N:].contiguous(), b)
        tolerance = 1e-5 if dtype == "float32" else 1e-2
        assert torch.allclose(out.float(), reference.float(), atol=tolerance, rtol=tolerance)
        if not R:
            assert torch.equal(out, y[:, :N] + 0)


def test_float_lora_bt_refuses_outputs_that_are_not_whole_vectors() -> None:
    with pytest.raises(ValueError, match="multiple of 16"):
        cpp_kernels.float_lora_bt(_rand(40, 8, dtype="float32"))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("rows", [3, 40])  # 40 rows: large enough to run on several threads
def test_consumers_add_the_lora_b_product_exactly_as_lora_b_add_then_the_kernel(
    dtype: str, rows: int
) -> None:
    """add_rms_norm, swiglu and rope_qkv with `lora_bt` read a folded group's [y | h] and give, bit for bit,
    what lora_b_add followed by the kernel gives (the decode step's fused path vs the one it replaces)."""
    E, F2, R = 96, 2 * 160, 24
    bt_o = cpp_kernels.float_lora_bt(_rand(E, R, dtype=dtype, seed=4, scale=0.3))  # dense, and as in a fold:
    x, y_ext, w = (
        _rand(rows, E, dtype=dtype, seed=5),
        _rand(rows, E + R, dtype=dtype, seed=6),
        _rand(E, dtype=dtype),
    )
    s, h = cpp_kernels.add_rms_norm(x, y_ext, w, 1e-5, bt_o)
    s_ref, h_ref = cpp_kernels.add_rms_norm(x, cpp_kernels.lora_b_add(y_ext, bt_o), w, 1e-5)
    assert torch.equal(s, s_ref) and torch.equal(h, h_ref)
    assert not torch.equal(s, cpp_kernels.add_rms_norm(x, y_ext[:, :E].contiguous(), w, 1e-5)[0])  # B counts

    bt_gu = cpp_kernels.float_lora_bt(_block_diagonal_b([F2 // 2, F2 // 2], [R // 2, R // 2], dtype, seed=7))
    gu_ext = _rand(rows, F2 + R, dtype=dtype, seed=8, scale=3.0)
    assert torch.equal(
        cpp_kernels.swiglu(gu_ext, bt_gu), cpp_kernels.swiglu(cpp_kernels.lora_b_add(gu_ext, bt_gu))
    )

    H, K, D, P = 6, 2, 32, 40
    N = (H + 2 * K) * D
    bt_qkv = cpp_kernels.float_lora_bt(_block_diagonal_b([H * D, K * D, K * D], [8, 8, 8], dtype, seed=9))
    qkv_ext = _rand(rows, N + R, dtype=dtype, seed=10)
    cos, ssin = _rand(P, D, dtype=dtype, seed=11), _rand(P, D, dtype=dtype, seed=12)
    positions = torch.arange(rows) % P
    caches = [torch.zeros(rows, K, P, D, dtype=qkv_ext.dtype) for _ in range(4)]
    q = cpp_kernels.rope_qkv(qkv_ext, cos, ssin, positions, caches[0], caches[1], H, bt_qkv)
    q_ref = cpp_kernels.rope_qkv(
        cpp_kernels.lora_b_add(qkv_ext, bt_qkv), cos, ssin, positions, caches[2], caches[3], H
    )
    assert torch.equal(q, q_ref) and torch.equal(caches[0], caches[2]) and torch.equal(caches[1], caches[3])


def test_consumers_refuse_a_lora_b_that_does_not_fit() -> None:
    x, w = _rand(4, 64, dtype="float32"), _rand(64, dtype="float32")
    bt = cpp_kernels.float_lora_bt(_rand(64, 8, dtype="float32"))
    with pytest.raises(ValueError, match="do not fit"):  # rows of 64 + 8 values expected
        cpp_kernels.add_rms_norm(x, _rand(4, 70, dtype="float32"), w, 1e-5, bt)
    with pytest.raises(ValueError, match="do not fit"):  # a B^T over 64 columns for a gate/up of 128
        cpp_kernels.swiglu(_rand(4, 128 + 8, dtype="bfloat16"), bt)
    with pytest.raises(ValueError, match="do not fit"):  # a raw tensor instead of float_lora_bt's
        cpp_kernels.swiglu(_rand(4, 128 + 8, dtype="bfloat16"), _rand(8, 128, dtype="float32"))  # type: ignore[arg-type]


def test_kernels_refuse_layouts_they_do_not_handle() -> None:
    x = _rand(4, 64, dtype="float32")
    with pytest.raises(ValueError, match="contiguous"):
        cpp_kernels.add_rms_norm(x.t(), None, _rand(4, dtype="float32"), 1e-5)
    with pytest.raises(ValueError, match="do not fit"):  # rows of 64 + 8 values expected
        cpp_kernels.lora_b_add(x, cpp_kernels.float_lora_bt(_rand(64, 8, dtype="float32")))
    with pytest.raises(ValueError, match="LoraBT"):  # a raw B^T
        cpp_kernels.lora_b_add(_rand(4, 72, dtype="bfloat16"), _rand(8, 64, dtype="float32"))  # type: ignore[arg-type]
    assert not cpp_kernels.supported(torch.float32, torch.device("cpu"), 64, 40)
    assert cpp_kernels.supported(torch.bfloat16, torch.device("cpu"), 64, 576)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("vocab", [4096, 1000])  # 1000: a vocabulary that is not a multiple of 16 (the tail)
def test_head_softmax_equals_float32_log_softmax(dtype: str, vocab: int) -> None:
    logits = _rand(9, vocab, dtype=dtype, scale=6.0)
    logits[3, 5] = 40.0  # one dominant token: probabilities near 1 and 0
    targets = torch.tensor([0, 5, vocab - 1, 5, 17, 300, 2, vocab - 2, 999])
    logp = torch.log_softmax(logits.float(), dim=-1)
    out = logits.clone()
    got_logprob, got_entropy = cpp_kernels.head_softmax(out, targets)
    torch.testing.assert_close(
        got_logprob, logp.gather(-1, targets[:, None]).squeeze(-1), rtol=1e-5, atol=1e-5
    )
    torch.testing.assert_close(got_entropy, -(logp.exp() * logp).sum(-1), rtol=1e-4, atol=1e-4)
    expected = logp.exp().to(out.dtype)  # the softmax in place, rounded once to the logits' dtype
    if dtype == "float32":
        torch.testing.assert_close(out, expected, rtol=1e-5, atol=1e-7)
    else:
        assert _ulps(out, expected) <= 1.01
    assert got_logprob[3].item() > -1e-3  # the dominant token


def test_head_softmax_refuses_bad_input_and_names_it() -> None:
    logits = _rand(4, 64, dtype="float32")
    with pytest.raises(ValueError, match="targets must lie in"):
        cpp_kernels.head_softmax(logits, torch.tensor([0, 1, 64, 2]))
    with pytest.raises(ValueError, match="contiguous"):
        cpp_kernels.head_softmax(logits.t(), torch.tensor([0, 1, 2, 3]))
    with pytest.raises(ValueError, match="targets"):
        cpp_kernels.head_softmax(logits, torch.tensor([0, 1]))
