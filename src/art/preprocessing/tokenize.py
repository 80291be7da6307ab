"""The reference's `art.preprocessing.tokenize` (its Unsloth trainer's tokenizer): art.training.reference_tokenize."""

from art.training.reference_tokenize import (
    SFTBatch,
    TokenizedResult,
    response_only_labels,
    tokenize_sft_batch,
    tokenize_trajectory,
)

__all__ = ["SFTBatch", "TokenizedResult", "response_only_labels", "tokenize_sft_batch", "tokenize_trajectory"]
