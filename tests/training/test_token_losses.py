"""The Tinker API's per-token losses (`art.training.token_losses`) and `Trainer.datum_losses`: sums over
tokens, gradients that accumulate across calls until `optimizer_step` (Tinker's contract), and a forward
pass that leaves no gradient."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("torch", reason="needs the `local` extra: pip install -e '.[local]'")

import torch

from art.base_model.loader import load_model_and_tokenizer
from art.chat.chat_template import ChatTemplate
from art.training.token_losses import REFUSED, REQUIRED_INPUTS, TOKEN_LOSSES, TokenDatum
from art.training.trainer import Trainer
from art.types import LoRAConfig, RuntimeOptions


def test_each_loss_is_its_formula() -> None:
    lp = torch.tensor([[-1.0, -2.0, -0.5]], requires_grad=True)
    q = torch.tensor([[-1.5, -2.0, -0.1]])
    a = torch.tensor([[1.0, -1.0, 2.0]])
    x = {"weights": torch.tensor([[0.0, 1.0, 1.0]]), "logprobs": q, "advantages": a}
    r = torch.exp(lp - q)
    expected = {
        "cross_entropy": -lp * x["weights"],
        "importance_sampling": -r * a,
        "ppo": -torch.minimum(r * a, r.clamp(0.8, 1.2) * a),
        "cispo": -r.clamp(0.8, 1.2) * lp * a,
        "dro": -(lp * a - 0.025 * (lp - q) ** 2),
    }
    assert set(TOKEN_LOSSES) == set(expected) == set(REQUIRED_INPUTS)
    for name, value in expected.items():
        assert torch.allclose(TOKEN_LOSSES[name](lp, x, {}), value), name
    assert not set(REFUSED) & set(TOKEN_LOSSES)
    # cispo's clipped ratio is a weight only: its gradient is -clip(r) * A, whatever r's own slope
    TOKEN_LOSSES["cispo"](lp, x, {}).sum().backward()
    assert torch.allclose(lp.grad, -r.detach().clamp(0.8, 1.2) * a)


def test_datum_losses_accumulate_until_the_optimizer_step(tiny_model_path: Path) -> None:
    model, tokenizer = load_model_and_tokenizer(str(tiny_model_path), dtype=torch.float32)
    trainer = Trainer(
        model, ChatTemplate(tokenizer), LoRAConfig(r=4), options=RuntimeOptions(train_compile=False)
    )
    one = TokenDatum([5, 6, 7, 8], {"target_tokens": [6, 7, 8, 9], "weights": [0.0, 1.0, 1.0, 1.0]})
    two = TokenDatum([10, 11], {"target_tokens": [11, 12], "weights": [1.0, 0.5]})

    def grads() -> list[torch.Tensor]:
        return [
            p.grad.clone() if p.grad is not None else torch.zeros_like(p) for _, p in trainer.named_params
        ]

    trainer.datum_losses([one], "cross_entropy", {}, backward=False)
    assert all(p.grad is None for _, p in trainer.named_params)  # a forward pass leaves nothing behind
    results = trainer.datum_losses([one], "cross_entropy", {}, backward=True)
    trainer.datum_losses([two], "cross_entropy", {}, backward=True)
    separately = grads()
    logprobs, losses = results[0]
    assert len(logprobs) == 4 and losses[0] == 0.0 and losses[1] == pytest.approx(-logprobs[1])
    trainer.optimizer.zero_grad(set_to_none=True)
    trainer.datum_losses([one, two], "cross_entropy", {}, backward=True, micro_batch_tokens=4)
    together = grads()
    assert any(float(g.abs().sum()) > 0 for g in together)
    for a, b in zip(separately, together, strict=True):
        assert torch.allclose(a, b, atol=1e-6)
    norm, skipped = trainer.optimizer_step(
        learning_rate=1e-3, betas=(0.9, 0.95), eps=1e-8, weight_decay=0.0, max_grad_norm=float("inf")
    )
    assert skipped is None and norm > 0
    assert all(p.grad is None for _, p in trainer.named_params)  # applied and cleared
