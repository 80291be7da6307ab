"""`art.loss`, the reference's path: art.training.reference_loss (the reference's RL loss over packed tensors)."""

from art.training.reference_loss import (
    AlignedLossInputs,
    Loss,
    LossInputs,
    compute_probs_corr,
    loss_fn,
    shift_tensor,
)

__all__ = ["AlignedLossInputs", "Loss", "LossInputs", "compute_probs_corr", "loss_fn", "shift_tensor"]
