"""The reference's `art.loss` (ported in art.training.reference_loss): on the same packed tokens it gives
the loss and gradient of ART's own `policy_loss` (CISPO and PPO, token- and sequence-level ratios), and its
KL penalty is the reference's zero-mean advantage adjustment; NaNs off the mask reach neither."""

from __future__ import annotations

import pytest
import torch

from art.loss import LossInputs, loss_fn, shift_tensor
from art.training.losses import policy_loss


def _packed(seed: int = 0) -> tuple[dict[str, torch.Tensor], torch.Tensor, torch.Tensor]:
    """Two sequences in one packed row of 12 tokens: (packed inputs, sequence advantages, new logprobs
    aligned with the shifted inputs)."""
    g = torch.Generator().manual_seed(seed)
    group_ids = torch.tensor([[1] * 6 + [2] * 6])
    mask = torch.tensor([[0, 0, 1, 1, 1, 1, 0, 0, 1, 1, 1, 0]], dtype=torch.bool)
    advantages_B = torch.tensor([0.7, -1.3])
    inputs = {
        "assistant_mask": mask,
        "logprobs": torch.where(mask, -torch.rand(1, 12, generator=g), torch.tensor(float("nan"))),
        "advantages": torch.where(group_ids == 1, advantages_B[0], advantages_B[1]),
        "weights": torch.ones(1, 12),
        "group_ids": group_ids,
    }
    return inputs, advantages_B, -torch.rand(1, 12, generator=g)


@pytest.mark.parametrize("loss", ["cispo", "ppo"])
@pytest.mark.parametrize("level", ["token", "sequence"])
def test_the_reference_loss_equals_ours_on_the_same_tokens(loss: str, level: str) -> None:
    inputs, advantages_B, new = _packed()
    config = {"ppo": loss == "ppo", "importance_sampling_level": level}
    theirs_new = new.clone().requires_grad_(True)
    theirs = loss_fn(LossInputs(inputs=inputs), theirs_new, None, None, config)
    theirs.policy_loss.backward()

    # ours: one row per sequence, its assistant tokens aligned with the shifted mask
    mask = shift_tensor(inputs["assistant_mask"], False)[0]
    sampled = shift_tensor(inputs["logprobs"], float("nan"))[0]
    seq = shift_tensor(inputs["group_ids"], 0)[0]
    rows = [(mask & (seq == g)).nonzero().flatten() for g in (1, 2)]
    ours_new = new.clone().requires_grad_(True)
    pad = max(len(r) for r in rows)

    def rowed(values: torch.Tensor) -> torch.Tensor:
        return torch.stack([torch.nn.functional.pad(values[r], (0, pad - len(r))) for r in rows])

    row_mask = torch.stack([torch.arange(pad) < len(r) for r in rows])
    eps, eps_high = (0.2, 0.2) if loss == "ppo" else (1.0, 4.0)
    ours = policy_loss(
        rowed(ours_new[0]),
        rowed(sampled),
        advantages_B,
        row_mask,
        loss_fn=loss,  # type: ignore[arg-type]
        epsilon=eps,
        epsilon_high=eps_high,
        importance_sampling_level=level,  # type: ignore[arg-type]
    )
    ours.loss.backward()
    assert theirs.policy_loss.item() == pytest.approx(ours.loss.item(), rel=1e-5)
    assert torch.allclose(theirs_new.grad, ours_new.grad, atol=1e-6)  # type: ignore[arg-type]


def test_the_kl_penalty_shifts_advantages_by_a_zero_mean_amount_and_nan_stays_off_the_mask() -> None:
    inputs, _, new = _packed(1)
    ref = new - torch.linspace(0, 1, 12)[None]
    plain = loss_fn(LossInputs(inputs=inputs), new, ref, None, {})
    assert plain.kl_policy_ref is None
    sample = loss_fn(
        LossInputs(inputs=inputs), new, ref, None, {"kl_penalty_coef": 0.5, "kl_penalty_source": "sample"}
    )
    learner = loss_fn(LossInputs(inputs=inputs), new, ref, None, {"kl_penalty_coef": 0.5})
    mask = shift_tensor(inputs["assistant_mask"], False).float()
    assert learner.kl_policy_ref is not None and sample.kl_policy_ref is not None
    assert learner.kl_policy_ref.item() == pytest.approx(
        ((new - ref) * mask).sum().item() / mask.sum().item()
    )
    assert sample.kl_policy_ref.item() != pytest.approx(learner.kl_policy_ref.item())

    poisoned = torch.where(mask.bool(), new, torch.tensor(float("nan"))).requires_grad_(True)
    entropies = torch.full((1, 12), float("nan"))
    out = loss_fn(inputs, poisoned, ref, entropies, {"kl_penalty_coef": 0.1})  # 0.5.18's plain dict form
    out.policy_loss.backward()
    assert torch.isfinite(out.policy_loss) and torch.isfinite(poisoned.grad).all()  # type: ignore[arg-type]
