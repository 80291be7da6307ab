"""Sampling: the counter-based RNG, batch independence, greedy, temperature/top_p distributions, logprobs."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from art.engines.base import splitmix64_reference  # noqa: E402
from art.engines.torch.sampling import (  # noqa: E402
    inverse_cdf,
    sample,
    splitmix64,
    uniforms,
)


@pytest.fixture(autouse=True)
def _one_thread() -> None:
    torch.set_num_threads(1)


def test_splitmix64_matches_the_python_reference() -> None:
    values = [0, 1, 2, 12345, 2**62 + 17, 2**63 - 1, -1, -(2**63)]
    got = splitmix64(torch.tensor(values, dtype=torch.int64)).tolist()
    expected = [splitmix64_reference(v % 2**64) for v in values]
    assert [g % 2**64 for g in got] == expected


def test_uniforms_are_in_open_unit_interval_and_deterministic() -> None:
    seeds = torch.arange(1000)
    u1 = uniforms(seeds, torch.zeros(1000, dtype=torch.int64))
    u2 = uniforms(seeds, torch.zeros(1000, dtype=torch.int64))
    assert torch.equal(u1, u2)
    assert float(u1.min()) > 0 and float(u1.max()) < 1
    assert abs(float(u1.mean()) - 0.5) < 0.05
    assert not torch.equal(u1, uniforms(seeds, torch.ones(1000, dtype=torch.int64)))


def _params(n: int, temperature: float = 1.0, top_p: float = 1.0) -> tuple[torch.Tensor, torch.Tensor]:
    return torch.full((n,), temperature), torch.full((n,), top_p)


def test_a_row_samples_the_same_token_whatever_else_is_in_the_batch() -> None:
    gen = torch.Generator().manual_seed(0)
    logits = torch.randn(6, 700, generator=gen) * 2
    temperature = torch.tensor([1.0, 0.7, 0.0, 1.0, 1.3, 1.0])
    top_p = torch.tensor([1.0, 0.9, 1.0, 0.5, 1.0, 0.95])
    seeds = torch.tensor([1, 2, 3, 4, 5, 6])
    counters = torch.tensor([0, 3, 1, 7, 2, 9])
    together = sample(logits, temperature, top_p, seeds, counters).token_ids_B
    for i in range(6):
        alone = sample(
            logits[i : i + 1], temperature[i : i + 1], top_p[i : i + 1], seeds[i : i + 1], counters[i : i + 1]
        )
        assert int(alone.token_ids_B[0]) == int(together[i])
    shuffled = torch.tensor([5, 3, 1, 0, 4, 2])
    again = sample(
        logits[shuffled], temperature[shuffled], top_p[shuffled], seeds[shuffled], counters[shuffled]
    )
    assert again.token_ids_B.tolist() == together[shuffled].tolist()


def test_greedy_is_argmax_and_logprobs_are_raw_log_softmax() -> None:
    logits = torch.randn(4, 300)
    temperature, top_p = _params(4, temperature=0.0)
    result = sample(logits, temperature, top_p, torch.arange(4), torch.zeros(4, dtype=torch.int64), top_k=5)
    assert result.token_ids_B.tolist() == logits.argmax(-1).tolist()
    reference = torch.log_softmax(logits, -1)
    assert torch.allclose(
        result.logprobs_B, reference.gather(-1, result.token_ids_B[:, None]).squeeze(-1), atol=1e-5
    )
    assert result.top_logprobs_BK is not None and result.top_ids_BK is not None
    assert torch.allclose(result.top_logprobs_BK, reference.topk(5, -1).values, atol=1e-5)
    # Temperature and top_p change what is sampled, never the reported logprob of a token.
    hot = sample(
        logits,
        torch.full((4,), 1.5),
        torch.full((4,), 0.8),
        torch.arange(4),
        torch.zeros(4, dtype=torch.int64),
    )
    assert torch.allclose(
        hot.logprobs_B, reference.gather(-1, hot.token_ids_B[:, None]).squeeze(-1), atol=1e-5
    )


@pytest.mark.parametrize(("temperature", "top_p"), [(1.0, 1.0), (0.5, 1.0), (1.0, 0.6), (1.4, 0.9)])
def test_empirical_distribution_matches_temperature_and_top_p(temperature: float, top_p: float) -> None:
    vocab, n = 300, 30000
    logits = torch.randn(vocab, generator=torch.Generator().manual_seed(1)) * 1.5
    probs = torch.softmax(logits / temperature, -1)
    if top_p < 1:
        sorted_p, order = probs.sort(descending=True)
        keep = (sorted_p.cumsum(0) - sorted_p) < top_p
        nucleus = torch.zeros_like(probs)
        nucleus[order[keep]] = sorted_p[keep]
        probs = nucleus / nucleus.sum()
    t, p = _params(n, temperature, top_p)
    tokens = sample(
        logits.expand(n, vocab).contiguous(), t, p, torch.arange(n), torch.zeros(n, dtype=torch.int64)
    ).token_ids_B
    empirical = torch.bincount(tokens, minlength=vocab).float() / n
    assert float(empirical[probs == 0].sum()) == 0.0
    assert 0.5 * float((empirical - probs).abs().sum()) < 0.08  # total variation: noise is about 0.04


def test_inverse_cdf_never_picks_zero_weight_entries() -> None:
    weights = torch.zeros(3, 600)
    weights[0, 5] = 1.0
    weights[1, 599] = 2.0
    weights[2, [0, 300]] = 1.0
    for u in (1e-12, 0.5, 1 - 1e-12):
        picked = inverse_cdf(weights, torch.full((3,), u, dtype=torch.float64)).tolist()
        assert picked[0] == 5 and picked[1] == 599 and picked[2] in (0, 300)


def test_a_workspace_is_reused_and_changes_nothing() -> None:
    from art.engines.torch.sampling import Workspace

    gen = torch.Generator().manual_seed(3)
    logits = torch.randn(6, 700, generator=gen) * 4
    temperature = torch.tensor([0.0, 0.7, 1.0, 1.3, 0.7, 1.0])
    top_p = torch.tensor([1.0, 0.9, 1.0, 0.5, 1.0, 0.95])
    seeds, counters = torch.arange(6), torch.arange(6) * 3
    fresh = sample(logits, temperature, top_p, seeds, counters, top_k=2)
    workspace = Workspace()
    for rows in (6, 4, 6):  # smaller batches reuse the same buffers
        reused = sample(
            logits[:rows], temperature[:rows], top_p[:rows], seeds[:rows], counters[:rows], 2, workspace
        )
        assert torch.equal(reused.token_ids_B, fresh.token_ids_B[:rows])
        assert torch.equal(reused.logprobs_B, fresh.logprobs_B[:rows])
        assert reused.top_ids_BK is not None and fresh.top_ids_BK is not None
        assert torch.equal(reused.top_ids_BK, fresh.top_ids_BK[:rows])
    pointers = [b.data_ptr() for b in workspace.get(6, 700, logits.device)]
    sample(logits, temperature, top_p, seeds, counters, 0, workspace)
    assert [b.data_ptr() for b in workspace.get(6, 700, logits.device)] == pointers


def _fast_available() -> bool:
    from art.kernels import cpp_kernels

    return cpp_kernels.usable(torch.float32, torch.device("cpu"), cpp_kernels.VECTOR_FLOATS)


@pytest.mark.parametrize(("rows", "vocab", "scale"), [(256, 49152, 3.0), (64, 49152, 8.0), (512, 700, 2.0)])
def test_the_cpp_sampler_picks_the_tokens_of_the_torch_path(rows: int, vocab: int, scale: float) -> None:
    if not _fast_available():
        pytest.fail("the C++ kernels do not build here (a C++ compiler is needed)")
    gen = torch.Generator().manual_seed(vocab + rows)
    logits = torch.randn(rows, vocab, generator=gen) * scale
    temperature = torch.tensor([1.0, 0.7, 0.0, 1.3] * (rows // 4))
    top_p = torch.tensor([1.0, 1.0, 1.0, 1.0, 0.9, 1.0, 0.5, 1.0] * (rows // 8))
    seeds, counters = torch.arange(rows) * 3 + 1, torch.arange(rows) % 11
    torch_path = sample(logits, temperature, top_p, seeds, counters, top_k=3)
    fast = sample(logits, temperature, top_p, seeds, counters, top_k=3, fast=True)
    assert fast.token_ids_B.tolist() == torch_path.token_ids_B.tolist()
    # Raw log-softmax at the token: the log-sum-exp is summed in another order (float32 ulps).
    reference = torch.log_softmax(logits.double(), -1).gather(-1, fast.token_ids_B[:, None]).squeeze(-1)
    assert torch.allclose(fast.logprobs_B.double(), reference, atol=2e-5, rtol=0)
    assert torch.allclose(fast.logprobs_B, torch_path.logprobs_B, atol=2e-5, rtol=0)
    assert fast.top_ids_BK is not None and torch_path.top_ids_BK is not None
    assert fast.top_logprobs_BK is not None and torch_path.top_logprobs_BK is not None
    assert torch.equal(fast.top_ids_BK, torch_path.top_ids_BK)
    assert torch.allclose(fast.top_logprobs_BK, torch_path.top_logprobs_BK, atol=2e-5, rtol=0)


def test_the_cpp_sampler_keeps_rows_independent_of_the_batch_and_never_picks_zero_weight() -> None:
    if not _fast_available():
        pytest.fail("the C++ kernels do not build here (a C++ compiler is needed)")
    gen = torch.Generator().manual_seed(5)
    logits = torch.randn(6, 1000, generator=gen) * 2
    logits[:, 500:] = float("-inf")  # zero weight: never sampled
    temperature = torch.tensor([1.0, 0.7, 0.0, 1.0, 1.3, 1.0])
    top_p = torch.tensor([1.0, 0.9, 1.0, 0.5, 1.0, 1.0])
    seeds, counters = torch.arange(6), torch.arange(6) * 2
    together = sample(logits, temperature, top_p, seeds, counters, fast=True)
    assert int(together.token_ids_B.max()) < 500
    for i in range(6):
        alone = sample(
            logits[i : i + 1], temperature[i : i + 1], top_p[i : i + 1], seeds[i : i + 1], counters[i : i + 1],
            fast=True,
        )  # fmt: skip
        assert int(alone.token_ids_B[0]) == int(together.token_ids_B[i])
        assert float(alone.logprobs_B[0]) == float(together.logprobs_B[i])
    assert together.token_ids_B[2] == logits[2].argmax()


@pytest.mark.parametrize("temperature", [1.0, 0.6])
def test_the_cpp_sampler_draws_from_the_softmax(temperature: float) -> None:
    if not _fast_available():
        pytest.fail("the C++ kernels do not build here (a C++ compiler is needed)")
    vocab, n = 300, 30000
    logits = torch.randn(vocab, generator=torch.Generator().manual_seed(2)) * 1.5
    probs = torch.softmax(logits / temperature, -1)
    t, p = _params(n, temperature)
    tokens = sample(
        logits.expand(n, vocab).contiguous(),
        t,
        p,
        torch.arange(n),
        torch.zeros(n, dtype=torch.int64),
        fast=True,
    ).token_ids_B
    empirical = torch.bincount(tokens, minlength=vocab).float() / n
    assert 0.5 * float((empirical - probs).abs().sum()) < 0.08  # total variation: noise is about 0.04


def test_a_bitmask_keeps_exactly_the_allowed_tokens() -> None:
    from art.engines.torch.sampling import apply_bitmask_

    V = 100  # not a multiple of 32: the last word's high bits point past the vocabulary
    allowed = [[0, 31, 32, 63, 99], [5, 64]]
    bitmask = torch.zeros(2, 4, dtype=torch.int32)
    for row, ids in enumerate(allowed):
        for t in ids:
            word = int(bitmask[row, t // 32]) & 0xFFFFFFFF | (1 << (t % 32))
            bitmask[row, t // 32] = word - (1 << 32) if word >= 1 << 31 else word
    logits = torch.randn(2, V)
    kept = logits.clone()
    apply_bitmask_(logits, bitmask)
    for row, ids in enumerate(allowed):
        finite = torch.isfinite(logits[row]).nonzero().flatten().tolist()
        assert finite == ids
        assert torch.equal(logits[row, ids], kept[row, ids])
