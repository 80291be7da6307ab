"""Per-token logprobs and entropy of a causal LM, without ever holding a batch's full logits.

The decoder runs once over the micro-batch; its hidden states at the positions we score (assistant tokens
only: prompt positions need no logits at all) go through the LM head a chunk of positions at a time:
hidden -> logits chunk (float32) -> log_softmax -> gather the target.

With gradients on, backward needs each position's softmax over the vocabulary. When all the micro-batch's
scored positions x vocabulary fit in `STORE_ELEMENTS`, `_HeadLogprobs` keeps the softmax in the head's dtype
(bf16: 2 bytes per element, 400 MB for 4096 positions of a 49k vocabulary) and its backward is one fused
multiply and one matmul: `d hidden = g * (onehot(target) - softmax) @ W`, with the target's own entry,
`1 - p_target`, taken from the float32 logprob (see `_HeadLogprobs.backward`). Otherwise (or with a logit softcap)
each chunk is checkpointed, so backward recomputes that chunk's logits instead of autograd keeping every
chunk's float32 tensors alive; peak extra memory is one chunk of `chunk_elements` floats (a few times).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
import torch.nn.functional as F
from torch.utils.checkpoint import checkpoint

from art.kernels import cpp_kernels
from art.training.fast_decoder import FastDecoder

# Elements (positions x vocabulary) of one logits chunk: 2**25 float32 = 128 MiB, ~680 positions for a
# 49k vocabulary. Big enough to keep the LM-head matmul efficient, small next to activations.
DEFAULT_CHUNK_ELEMENTS = 2**25
# Positions x vocabulary up to which the softmax is kept for backward instead of recomputed (2**28 bf16 =
# 512 MiB): no recomputed LM-head matmul, no float32 log_softmax graph.
STORE_ELEMENTS = 2**28


class _HeadLogprobs(torch.autograd.Function):
    """(logprobs_N, entropy_N) of targets under `hidden_NH @ weight_VH^T`, softmax kept for backward.

    Logits are computed in the weight's dtype (what autocast does for a bf16 head), statistics in float32:
    by the C++ kernel `cpp_kernels.head_softmax` in place in the saved buffer where it builds, else by torch
    ops on a float32 copy of each chunk (the same function; the tests compare the two).
    Only the weight's dtype copy of the softmax is saved; the weight is frozen (no gradient for it).
    """

    @staticmethod
    def forward(
        ctx: Any,
        hidden_NH: torch.Tensor,
        weight_VH: torch.Tensor,
        targets_N: torch.Tensor,
        chunk: int,
        native_bf16: bool | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        # `native_bf16` (RuntimeOptions.native_bf16; None: not given, allowed): as the C++ kernels run.
        ctx.inputs = 5 if native_bf16 is not None else 4  # backward gives one gradient per input
        native_bf16 = native_bf16 is not False
        N, V = hidden_NH.shape[0], weight_VH.shape[0]
        probs_NV = torch.empty((N, V), dtype=weight_VH.dtype, device=hidden_NH.device)
        h = hidden_NH.to(weight_VH.dtype)
        if cpp_kernels.usable(weight_VH.dtype, weight_VH.device, native_bf16=native_bf16):
            # Logits straight into the saved buffer (one matmul: 3080 x 49k runs ~25% faster than in chunks
            # of 682), turned into the softmax there, one pass per row.
            torch.mm(h, weight_VH.t(), out=probs_NV)
            logprobs_N, entropy_N = cpp_kernels.head_softmax(probs_NV, targets_N, native_bf16=native_bf16)
        else:
            logprobs_N = torch.empty(N, dtype=torch.float32, device=hidden_NH.device)
            entropy_N = torch.empty_like(logprobs_N)
            for start in range(0, N, chunk):
                end = min(start + chunk, N)
                logits = F.linear(h[start:end], weight_VH).float()
                lse = torch.logsumexp(logits, dim=-1)
                logprobs_N[start:end] = logits.gather(-1, targets_N[start:end, None]).squeeze(-1) - lse
                logits -= lse[:, None]  # now log-softmax, in place
                p = logits.exp()
                entropy_N[start:end] = -(p * logits).sum(-1)
                probs_NV[start:end] = p
        ctx.save_for_backward(probs_NV, weight_VH, targets_N, logprobs_N)
        ctx.hidden_dtype = hidden_NH.dtype
        ctx.mark_non_differentiable(entropy_N)
        return logprobs_N, entropy_N

    @staticmethod
    def backward(
        ctx: Any, grad_logprobs_N: torch.Tensor, _grad_entropy: torch.Tensor | None
    ) -> tuple[torch.Tensor | None, ...]:
        probs_NV, weight_VH, targets_N, logprobs_N = ctx.saved_tensors
        g_N = grad_logprobs_N.to(probs_NV.dtype)
        # d logprob / d logits = onehot(target) - softmax; scaled by the incoming gradient.
        d_NV = probs_NV.mul_(-g_N[:, None])  # the saved softmax is not needed again: reuse its memory
        # The target's entry is g * (1 - p_target). Not `-g * p + g` from the saved softmax: in bf16, p is
        # rounded to steps of 2**-8 near 1, so once the model is confident (p > 0.996) that difference is
        # rounding noise several times the true gradient, and AdamW, which normalises, follows the noise
        # (seen: SFT on a tiny model spiked to gradient norms of 500 and missed answers float32 learned).
        # From the float32 logprob, 1 - p = -expm1(logprob) keeps its relative precision.
        rows_N = torch.arange(d_NV.shape[0], device=d_NV.device)
        d_NV[rows_N, targets_N] = (grad_logprobs_N.float() * -torch.expm1(logprobs_N)).to(d_NV.dtype)
        return ((d_NV @ weight_VH).to(ctx.hidden_dtype), *[None] * (ctx.inputs - 1))


def decoder_and_head(model: Any) -> tuple[torch.nn.Module, torch.nn.Module, float | None]:
    """(decoder stack, LM head, final logit softcap or None) of a Hugging Face causal LM or a PEFT wrapper."""
    base = model.get_base_model() if hasattr(model, "get_base_model") else model
    softcap = getattr(base.config, "final_logit_softcapping", None)
    return base.get_decoder(), base.get_output_embeddings(), softcap


def _chunk_logprobs(
    head: torch.nn.Module, softcap: float | None
) -> Callable[[torch.Tensor, torch.Tensor], tuple[torch.Tensor, torch.Tensor]]:
    def fn(hidden_NH: torch.Tensor, targets_N: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        logits_NV = head(hidden_NH).float()
        if softcap:
            logits_NV = torch.tanh(logits_NV / softcap) * softcap
        logp_NV = F.log_softmax(logits_NV, dim=-1)
        logprobs_N = logp_NV.gather(-1, targets_N[:, None]).squeeze(-1)
        with torch.no_grad():  # entropy is a metric: no gradient
            entropy_N = -(logp_NV.exp() * logp_NV).sum(-1)
        return logprobs_N, entropy_N

    return fn


def head_logprobs(
    hidden_NH: torch.Tensor,
    targets_N: torch.Tensor,
    head: torch.nn.Module,
    *,
    softcap: float | None = None,
    chunk_elements: int = DEFAULT_CHUNK_ELEMENTS,
    store_elements: int = STORE_ELEMENTS,
    native_bf16: bool = True,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Logprobs (with gradient) and entropies (without) of `targets_N` given final hidden states
    (`native_bf16`: as the C++ kernels run, `RuntimeOptions.native_bf16`)."""
    weight: Any = getattr(head, "weight", None)
    vocab = int(getattr(head, "out_features", 0) or weight.shape[0])
    chunk = max(1, chunk_elements // vocab)
    fn = _chunk_logprobs(head, softcap)
    needs_grad = torch.is_grad_enabled() and (
        hidden_NH.requires_grad or any(p.requires_grad for p in head.parameters())
    )
    if (
        needs_grad
        and not softcap
        and type(head) is torch.nn.Linear
        and head.bias is None
        and not head.weight.requires_grad
        and hidden_NH.shape[0] * vocab <= store_elements
    ):
        return _HeadLogprobs.apply(hidden_NH, head.weight, targets_N, chunk, native_bf16)
    logprobs: list[torch.Tensor] = []
    entropies: list[torch.Tensor] = []
    for start in range(0, hidden_NH.shape[0], chunk):
        h, t = hidden_NH[start : start + chunk], targets_N[start : start + chunk]
        lp, ent = checkpoint(fn, h, t, use_reentrant=False) if needs_grad else fn(h, t)
        logprobs.append(lp)
        entropies.append(ent)
    if not logprobs:
        empty = hidden_NH.new_zeros(0, dtype=torch.float32)
        return empty, empty
    return torch.cat(logprobs), torch.cat(entropies)


def token_logprobs(
    model: Any,
    input_ids_BT: torch.Tensor,
    attention_mask_BT: torch.Tensor,
    target_ids_BT: torch.Tensor,
    score_mask_BT: torch.Tensor,
    *,
    chunk_elements: int = DEFAULT_CHUNK_ELEMENTS,
    fast_decoder: FastDecoder | None = None,
    native_bf16: bool = True,
) -> tuple[torch.Tensor, torch.Tensor]:
    """(logprobs_BT, entropy_BT) of `target_ids_BT`, float32, zero where `score_mask_BT` is False.

    Position t scores target t given inputs up to t. Adapters follow the model's current state (use
    `model.disable_adapter()` around the call for the base model). `fast_decoder` (built for this model)
    replaces the model's own decoder forward when it can compute this batch (see fast_decoder.py).
    """
    decoder, head, softcap = decoder_and_head(model)
    if fast_decoder is not None and fast_decoder.usable(attention_mask_BT):
        shared = fast_decoder.shared_prefix_length(input_ids_BT, attention_mask_BT)
        hidden_BTH = fast_decoder(input_ids_BT, shared_prefix=shared)
    else:
        hidden_BTH = decoder(
            input_ids=input_ids_BT, attention_mask=attention_mask_BT, use_cache=False
        ).last_hidden_state
    hidden_NH = hidden_BTH[score_mask_BT]
    logprobs_N, entropy_N = head_logprobs(
        hidden_NH,
        target_ids_BT[score_mask_BT],
        head,
        softcap=softcap,
        chunk_elements=chunk_elements,
        native_bf16=native_bf16,
    )
    logprobs_BT = torch.zeros(score_mask_BT.shape, dtype=torch.float32, device=hidden_BTH.device)
    entropy_BT = torch.zeros_like(logprobs_BT)
    logprobs_BT = logprobs_BT.masked_scatter(score_mask_BT, logprobs_N)
    entropy_BT = entropy_BT.masked_scatter(score_mask_BT, entropy_N)
    return logprobs_BT, entropy_BT
