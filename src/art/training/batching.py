"""Micro-batches bounded by a token budget: plan (which sequences go together) and collate (to tensors).

Sequences are sorted by length (longest first) and cut greedily so that `rows x longest row` (the padded
size, which is what memory and compute pay for) stays within `micro_batch_tokens`. Sorting keeps padding
small without packing several sequences into one row, which would make every row's attention quadratic in
the packed length. A sequence longer than the budget goes alone. Tensors are built one micro-batch at a
time, so memory follows the budget, not the number of groups.

Layout: the model reads `input_ids_BT = ids[:-1]` and is scored on `target_ids_BT = ids[1:]`; the masks and
sampled logprobs are shifted the same way, so position t of every *_BT tensor is about target token t.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import torch

from art.training.tokenize import TokenizedSequence


@dataclass
class MicroBatch:
    """Right-padded tensors of a few sequences (B rows, T = longest input length)."""

    input_ids_BT: torch.Tensor  # long
    attention_mask_BT: torch.Tensor  # long, 1 on real tokens
    target_ids_BT: torch.Tensor  # long
    loss_mask_BT: torch.Tensor  # bool, True on sampled tokens of trainable turns
    sampled_logprobs_BT: torch.Tensor  # float32, 0 where loss_mask is False; NaN on a trained token: unknown
    advantages_B: torch.Tensor  # float32

    @property
    def num_tokens(self) -> int:
        """Real (unpadded) input tokens."""
        return int(self.attention_mask_BT.sum())


def plan_micro_batches(lengths: Sequence[int], micro_batch_tokens: int) -> list[list[int]]:
    """Indices of sequences per micro-batch, longest first; padded size within the budget when possible."""
    order = sorted(range(len(lengths)), key=lambda i: -lengths[i])
    batches: list[list[int]] = []
    current: list[int] = []
    for i in order:
        # Sorted descending, so the first sequence of a batch is its longest (its padded row length).
        row = lengths[current[0]] if current else lengths[i]
        if current and (len(current) + 1) * row > micro_batch_tokens:
            batches.append(current)
            current = []
        current.append(i)
    if current:
        batches.append(current)
    return batches


def collate(sequences: Sequence[TokenizedSequence], pad_id: int) -> MicroBatch:
    """Shifted, right-padded tensors of `sequences` (see module docstring)."""
    B = len(sequences)
    T = max(len(s) for s in sequences) - 1
    input_ids_BT = torch.full((B, T), pad_id, dtype=torch.long)
    target_ids_BT = torch.full((B, T), pad_id, dtype=torch.long)
    attention_mask_BT = torch.zeros((B, T), dtype=torch.long)
    loss_mask_BT = torch.zeros((B, T), dtype=torch.bool)
    sampled_logprobs_BT = torch.zeros((B, T), dtype=torch.float32)
    for b, seq in enumerate(sequences):
        n = len(seq) - 1
        ids = torch.tensor(seq.token_ids, dtype=torch.long)
        input_ids_BT[b, :n] = ids[:-1]
        target_ids_BT[b, :n] = ids[1:]
        attention_mask_BT[b, :n] = 1
        loss_mask_BT[b, :n] = torch.tensor(seq.assistant_mask[1:], dtype=torch.bool)
        sampled_logprobs_BT[b, :n] = torch.tensor(  # NaN stays only on trained tokens: "not known"
            [
                x if m or not math.isnan(x) else 0.0
                for x, m in zip(seq.sampled_logprobs[1:], seq.assistant_mask[1:], strict=True)
            ],
            dtype=torch.float32,
        )
    advantages_B = torch.tensor([s.advantage for s in sequences], dtype=torch.float32)
    return MicroBatch(
        input_ids_BT, attention_mask_BT, target_ids_BT, loss_mask_BT, sampled_logprobs_BT, advantages_B
    )
