"""Each loss against a small hand-computed example: values, gradients, clip fraction, KL."""

from __future__ import annotations

import math

import pytest
import torch

from art.training.losses import policy_loss

# One sequence of three positions; the last is not an assistant token (its values must not matter).
NEW = [-1.0, -2.0, -7.0]
OLD = [-1.5, -1.0, -0.1]
MASK = [True, True, False]
R1, R2 = math.exp(0.5), math.exp(-1.0)  # token ratios exp(new - old): 1.6487, 0.3679


def run(advantage: float, **kwargs):
    logprobs_BT = torch.tensor([NEW], requires_grad=True)
    out = policy_loss(
        logprobs_BT, torch.tensor([OLD]), torch.tensor([advantage]), torch.tensor([MASK]), **kwargs
    )
    out.loss.backward()
    return out, logprobs_BT.grad[0].tolist()


def test_cispo_default_clip():
    # -clip(r, 0, 5) * A * logp, mean over 2 tokens; the gradient is the (detached) weight only.
    out, grad = run(2.0, loss_fn="cispo", epsilon=1.0, epsilon_high=4.0)
    assert out.loss.item() == pytest.approx((-R1 * 2 * -1.0 - R2 * 2 * -2.0) / 2, rel=1e-6)
    assert grad == pytest.approx([-R1 * 2 / 2, -R2 * 2 / 2, 0.0], rel=1e-6)
    assert out.clipped_tokens == 0 and out.ratio_sum == pytest.approx(R1 + R2, rel=1e-6)


def test_cispo_upper_clip_keeps_the_gradient():
    out, grad = run(2.0, loss_fn="cispo", epsilon=1.0, epsilon_high=0.2)
    assert out.loss.item() == pytest.approx((-1.2 * 2 * -1.0 - R2 * 2 * -2.0) / 2, rel=1e-6)
    assert grad == pytest.approx([-1.2, -R2, 0.0], rel=1e-6)  # clipped token still learns, with weight 1.2
    assert out.clipped_tokens == 1


def test_ppo_positive_advantage():
    # min(r*A, clip(r, .8, 1.2)*A): token 1 is clipped (no gradient), token 2 is not.
    out, grad = run(2.0, loss_fn="ppo", epsilon=0.2, epsilon_high=0.2)
    assert out.loss.item() == pytest.approx(-(1.2 * 2 + R2 * 2) / 2, rel=1e-6)
    assert grad == pytest.approx([0.0, -2 * R2 / 2, 0.0], rel=1e-6)
    assert out.clipped_tokens == 2  # both ratios lie outside [0.8, 1.2]


def test_ppo_negative_advantage():
    out, grad = run(-1.0, loss_fn="ppo", epsilon=0.2, epsilon_high=0.2)
    # token 1: min(-1.6487, -1.2) = -1.6487 (unclipped); token 2: min(-0.3679, -0.8) = -0.8 (clipped)
    assert out.loss.item() == pytest.approx((R1 + 0.8) / 2, rel=1e-6)
    assert grad == pytest.approx([R1 / 2, 0.0, 0.0], rel=1e-6)


def test_sequence_level_ratio_gspo():
    s = math.exp(((-1.0 + 1.5) + (-2.0 + 1.0)) / 2)  # exp(mean log-ratio) = exp(-0.25) = 0.7788
    out, grad = run(2.0, loss_fn="ppo", epsilon=0.2, epsilon_high=0.2, importance_sampling_level="sequence")
    assert out.loss.item() == pytest.approx(-s * 2, rel=1e-6)  # every token carries the same -s*A
    # d(-s*A)/dlogp_t = -A * s / n for each of the n = 2 tokens
    assert grad == pytest.approx([-2 * s / 2, -2 * s / 2, 0.0], rel=1e-6)
    assert out.ratio_sum == pytest.approx(2 * s, rel=1e-6)
    out, grad = run(2.0, loss_fn="cispo", importance_sampling_level="sequence")
    assert out.loss.item() == pytest.approx(-s * 2 * (-1.0 - 2.0) / 2, rel=1e-6)
    assert grad == pytest.approx([-s, -s, 0.0], rel=1e-6)


@pytest.mark.parametrize(
    ("level", "blend"),
    [
        ("average", lambda r, s: (r + s) / 2),
        ("geometric_average", lambda r, s: math.sqrt(r * s)),
    ],
)
def test_average_levels_blend_token_and_sequence_ratios(level, blend):
    s = math.exp(-0.25)  # the sequence ratio of the example, as in the GSPO test
    w1, w2 = blend(R1, s), blend(R2, s)  # the reference's blends: (token + seq) / 2, sqrt(token * seq)
    out, grad = run(2.0, loss_fn="cispo", importance_sampling_level=level)
    assert out.ratio_sum == pytest.approx(w1 + w2, rel=1e-6)
    assert out.loss.item() == pytest.approx((-w1 * 2 * -1.0 - w2 * 2 * -2.0) / 2, rel=1e-6)
    assert grad == pytest.approx([-w1, -w2, 0.0], rel=1e-6)  # CISPO: the blended ratio is the weight


def test_kl_penalty_k3():
    ref = torch.tensor([[-1.2, -2.5, 0.0]])
    d1, d2 = -1.2 - -1.0, -2.5 - -2.0
    k1, k2 = math.exp(d1) - d1 - 1, math.exp(d2) - d2 - 1
    base, _ = run(2.0)
    out, grad = run(2.0, ref_logprobs_BT=ref, kl_penalty_coef=0.1)
    assert out.kl_sum == pytest.approx(k1 + k2, rel=1e-6)
    assert out.loss.item() == pytest.approx(base.loss.item() + 0.1 * (k1 + k2) / 2, rel=1e-6)
    # d k3 / d logp = 1 - exp(ref - logp)
    assert grad == pytest.approx(
        [-R1 + 0.1 * (1 - math.exp(d1)) / 2, -R2 + 0.1 * (1 - math.exp(d2)) / 2, 0.0], rel=1e-6
    )


def test_normalizer_sums_micro_batches_to_the_mean():
    out, _ = run(2.0, normalizer=4.0)
    full, _ = run(2.0)
    assert out.loss.item() == pytest.approx(full.loss.item() * 2 / 4, rel=1e-6)


def test_an_unknown_importance_sampling_level_is_refused_with_the_valid_ones():
    from pydantic import ValidationError

    from art.types import TrainSpec

    assert (
        TrainSpec(importance_sampling_level="geometric_average").importance_sampling_level
        == "geometric_average"
    )
    with pytest.raises(ValidationError, match="importance_sampling_level") as caught:
        TrainSpec(importance_sampling_level="harmonic")
    assert "'average'" in str(caught.value) and "'geometric_average'" in str(caught.value)
