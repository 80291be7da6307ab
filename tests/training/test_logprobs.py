"""Chunked logprobs (and their gradients) equal the plain full-logits computation."""

from __future__ import annotations

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
