"""Losses over explicit per-token inputs, as the Tinker API defines them (`forward_backward(data, loss_fn)`).

A datum is N input tokens and per-position inputs of length N: `target_tokens` (position i predicts
`target_tokens[i]`) and, per loss, `weights`, or the sampler's `logprobs` (q) and `advantages` (A). Unlike
ART's own step losses (masked means, `losses.py`), these are **sums over tokens**, Tinker's convention:
the client normalises through its weights and advantages. With lp the learner's logprob of the target
and r = exp(lp - q):

    cross_entropy        -lp * weights
    importance_sampling  -r * A
    ppo                  -min(r * A, clip(r, lo, hi) * A)      lo, hi = clip_low/high_threshold (0.8, 1.2)
    cispo                -clip(r, lo, hi).detach() * lp * A    the same two thresholds
    dro                  -(lp * A - beta / 2 * (lp - q)^2)      beta (0.05)

Not computed (`REFUSED`, each with why): gspo and stable_reinforce (Tinker has not published their
formulas), custom (a server-side loss registered by `create_custom_loss`; the SDK's
`forward_backward_custom` runs on the client over `cross_entropy` and works).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import torch

from art.training.losses import MAX_LOG_RATIO

TokenLoss = Callable[[torch.Tensor, Mapping[str, torch.Tensor], Mapping[str, float]], torch.Tensor]
"""`(lp_BT, inputs_BT by name, config) -> elementwise loss_BT` (zero where the mask is off is the caller's)."""


def _ratio(lp_BT: torch.Tensor, q_BT: torch.Tensor) -> torch.Tensor:
    return torch.exp((lp_BT - q_BT).clamp(max=MAX_LOG_RATIO))


def cross_entropy(lp_BT: torch.Tensor, x: Mapping[str, torch.Tensor], _: Mapping[str, float]) -> torch.Tensor:
    return -lp_BT * x["weights"]


def importance_sampling(
    lp_BT: torch.Tensor, x: Mapping[str, torch.Tensor], _: Mapping[str, float]
) -> torch.Tensor:
    return -_ratio(lp_BT, x["logprobs"]) * x["advantages"]


def ppo(lp_BT: torch.Tensor, x: Mapping[str, torch.Tensor], config: Mapping[str, float]) -> torch.Tensor:
    r_BT, a_BT = _ratio(lp_BT, x["logprobs"]), x["advantages"]
    lo, hi = config.get("clip_low_threshold", 0.8), config.get("clip_high_threshold", 1.2)
    return -torch.minimum(r_BT * a_BT, r_BT.clamp(lo, hi) * a_BT)


def cispo(lp_BT: torch.Tensor, x: Mapping[str, torch.Tensor], config: Mapping[str, float]) -> torch.Tensor:
    lo, hi = config.get("clip_low_threshold", 0.8), config.get("clip_high_threshold", 1.2)
    return -_ratio(lp_BT, x["logprobs"]).detach().clamp(lo, hi) * lp_BT * x["advantages"]


def dro(lp_BT: torch.Tensor, x: Mapping[str, torch.Tensor], config: Mapping[str, float]) -> torch.Tensor:
    beta = config.get("beta", 0.05)
    return -(lp_BT * x["advantages"] - 0.5 * beta * (lp_BT - x["logprobs"]) ** 2)


TOKEN_LOSSES: dict[str, TokenLoss] = {
    "cross_entropy": cross_entropy,
    "importance_sampling": importance_sampling,
    "ppo": ppo,
    "cispo": cispo,
    "dro": dro,
}
"""Every loss computed here, by its Tinker name."""

REQUIRED_INPUTS: dict[str, tuple[str, ...]] = {
    "cross_entropy": ("target_tokens", "weights"),
    **{
        name: ("target_tokens", "logprobs", "advantages")
        for name in ("importance_sampling", "ppo", "cispo", "dro")
    },
}
"""The `loss_fn_inputs` each loss reads (a datum without one of them is refused before anything runs)."""

REFUSED: dict[str, str] = {
    "gspo": "its formula is not published by Tinker",
    "stable_reinforce": "its formula is not published by Tinker",
    "custom": "server-side custom losses are off (the SDK's forward_backward_custom runs on the client and works)",
}
"""Losses the SDK names that this server does not compute, with why."""


@dataclass
class TokenDatum:
    """One Tinker datum: its N input tokens and its per-position inputs (each N long; `target_tokens` ints)."""

    tokens: list[int]
    inputs: dict[str, list[float]]


@dataclass
class DatumBatch:
    """Right-padded tensors of a few datums (B rows, T = the longest datum)."""

    input_ids_BT: torch.Tensor  # long
    attention_mask_BT: torch.Tensor  # long, 1 on real positions
    target_ids_BT: torch.Tensor  # long
    mask_BT: torch.Tensor  # bool, True on real positions (every one is scored)
    inputs_BT: dict[str, torch.Tensor]  # float32, 0 on padding


def collate_datums(datums: Sequence[TokenDatum], pad_id: int) -> DatumBatch:
    """The tensors of `datums`, padded on the right with `pad_id` (inputs with 0)."""
    B, T = len(datums), max(len(d.tokens) for d in datums)
    input_ids_BT = torch.full((B, T), pad_id, dtype=torch.long)
    target_ids_BT = torch.full((B, T), pad_id, dtype=torch.long)
    mask_BT = torch.zeros((B, T), dtype=torch.bool)
    names = sorted({k for d in datums for k in d.inputs} - {"target_tokens"})
    inputs_BT = {k: torch.zeros((B, T), dtype=torch.float32) for k in names}
    for b, datum in enumerate(datums):
        n = len(datum.tokens)
        input_ids_BT[b, :n] = torch.tensor(datum.tokens, dtype=torch.long)
        target_ids_BT[b, :n] = torch.tensor([int(t) for t in datum.inputs["target_tokens"]], dtype=torch.long)
        mask_BT[b, :n] = True
        for k in names:
            if k in datum.inputs:
                inputs_BT[k][b, :n] = torch.tensor(datum.inputs[k], dtype=torch.float32)
    return DatumBatch(input_ids_BT, mask_BT.long(), target_ids_BT, mask_BT, inputs_BT)
