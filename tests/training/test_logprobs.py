"""Chunked logprobs (and their gradients) equal the plain full-logits computation."""

from __future__ import annotations

import math

import pytest
import torch

from art.training.logprobs import token_logprobs


@pytest.fixture(scope="module")
def peft_model(tiny_model_path):
    import peft
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(tiny_model_path)
    wrapped = peft.get_peft_model(model, peft.LoraConfig(r=4, target_modules=["q_proj", "v_proj"]))
    torch.manual_seed(0)
    with torch.no_grad():  # non-zero B so that the adapter changes the output
        for name, p in wrapped.named_parameters():
            if "lora_B" in name:
                p.normal_(0, 0.1)
    return wrapped


def test_chunked_equals_full_logits(peft_model):
    torch.manual_seed(1)
    vocab = peft_model.get_base_model().config.vocab_size
    ids_BT = torch.randint(0, vocab, (3, 12))
    attention_BT = torch.ones_like(ids_BT)
    attention_BT[2, 9:] = 0  # right padding
    inputs, targets = ids_BT[:, :-1], ids_BT[:, 1:]
    attention = attention_BT[:, :-1]
    score_BT = attention.bool().clone()
    score_BT[0, :4] = False  # prompt positions are not scored

    params = [p for p in peft_model.parameters() if p.requires_grad]
    logits = peft_model(input_ids=inputs, attention_mask=attention).logits.float()
    full_BT = torch.log_softmax(logits, -1).gather(-1, targets[..., None]).squeeze(-1) * score_BT
    probs = torch.softmax(logits, -1)
    full_entropy_BT = -(probs * torch.log_softmax(logits, -1)).sum(-1) * score_BT
    full_grads = torch.autograd.grad(full_BT.sum(), params)

    # 3 positions per chunk: many chunks, the last one partial.
    chunked_BT, entropy_BT = token_logprobs(
        peft_model, inputs, attention, targets, score_BT, chunk_elements=3 * vocab
    )
    chunked_grads = torch.autograd.grad(chunked_BT.sum(), params)
    torch.testing.assert_close(chunked_BT, full_BT, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(entropy_BT, full_entropy_BT.detach(), atol=1e-5, rtol=1e-5)
    for a, b in zip(chunked_grads, full_grads, strict=True):
        torch.testing.assert_close(a, b, atol=1e-6, rtol=1e-4)
    assert not entropy_BT.requires_grad


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32])
@pytest.mark.parametrize("cpp", [True, False], ids=["cpp-softmax", "torch-softmax"])
def test_a_confident_models_gradient_keeps_its_precision(
    dtype: torch.dtype, cpp: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Once the model is confident (p_target > 0.996), d logprob / d logit_target = 1 - p_target is tiny, and a
    bf16 softmax cannot hold it: the gradient must still be float64's, within bf16's rounding of the rest."""
    from art.kernels import cpp_kernels
    from art.training.logprobs import head_logprobs

    if not cpp:
        monkeypatch.setattr(cpp_kernels, "usable", lambda *a, **k: False)
    torch.manual_seed(0)
    V, H, N = 512, 64, 24
    head = torch.nn.Linear(H, V, bias=False).to(dtype).requires_grad_(False)
    with torch.no_grad():
        head.weight.normal_(0, 0.125)
    targets_N = torch.randint(0, V, (N,))
    # Hidden states pointing at their target's row, scaled so that 1 - p_target runs from 3e-3 down to 1e-4.
    w_NH = head.weight[targets_N].double()
    want_N = torch.logspace(math.log10(3e-3), -4, N, dtype=torch.float64)
    lo_N1, hi_N1 = torch.zeros(N, 1, dtype=torch.float64), torch.full((N, 1), 100.0, dtype=torch.float64)
    for _ in range(60):  # bisection on the scale
        mid_N1 = (lo_N1 + hi_N1) / 2
        p_N = torch.softmax(w_NH * mid_N1 @ head.weight.double().t(), -1).gather(-1, targets_N[:, None])
        lo_N1, hi_N1 = (
            torch.where(1 - p_N > want_N[:, None], mid_N1, lo_N1),
            torch.where(1 - p_N > want_N[:, None], hi_N1, mid_N1),
        )
    hidden_NH = (w_NH * lo_N1).to(dtype).requires_grad_(True)
    g_N = torch.randn(N)  # RL advantages are either sign

    logprobs_N, _ = head_logprobs(hidden_NH, targets_N, head)
    (grad_NH,) = torch.autograd.grad((logprobs_N * g_N).sum(), hidden_NH)

    h64 = hidden_NH.detach().double().requires_grad_(True)
    logp_N = torch.log_softmax(h64 @ head.weight.double().t(), -1).gather(-1, targets_N[:, None]).squeeze(-1)
    assert float(logp_N.exp().min()) > 0.996  # the regime the test is about
    (ref_NH,) = torch.autograd.grad((logp_N * g_N.double()).sum(), h64)
    rel_err_N = (grad_NH.double() - ref_NH).norm(dim=-1) / ref_NH.norm(dim=-1)
    # bf16 rounds the inputs of the final matmul, whose two terms nearly cancel here: up to ~7% off (seen).
    # Before the fix bf16 rows were 54% to 137% off: the target's entry was rounding noise.
    assert float(rel_err_N.max()) < 0.1, rel_err_N
