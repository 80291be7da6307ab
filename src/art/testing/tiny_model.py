"""Tiny causal language models made on the spot, for tests, benchmarks' quick modes and offline demos.

`make_tiny_model(path)` writes a random-weight Llama (or Qwen2) of a few hundred thousand parameters
and a byte-level BPE tokenizer trained in well under a second, with a ChatML chat template, into a local
folder that `transformers.AutoModelForCausalLM.from_pretrained(path)` loads like any Hugging Face model.
Random weights prove the plumbing; tiny tasks ("answer with the digit 7") prove learning.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

# SmolLM2's own template (ChatML without tool support): the built-in Hermes template takes over for tools,
# exactly as it does for the default model.
SMOLLM_STYLE_TEMPLATE = (
    "{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}"
    "{{ '<|im_start|>system\\nYou are a helpful AI assistant.<|im_end|>\\n' }}{% endif %}"
    "{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n'}}"
    "{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
)

SPECIAL_TOKENS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]

_CORPUS = [
    "You are a helpful AI assistant. Answer the question.",
    "What is the digit? Reply with one digit: 0 1 2 3 4 5 6 7 8 9",
    '<tool_call>\n{"name": "search", "arguments": {"query": "hello world"}}\n</tool_call>',
    "<tool_response>\nresult: 42\n</tool_response>",
    '<tools>\n{"type": "function", "function": {"name": "add", "parameters": {}}}\n</tools>',
    "The quick brown fox jumps over the lazy dog. Tic tac toe board: X O . row col 1 2 3 A B C",
    "system user assistant tool function name arguments content role",
]


def make_tiny_model(
    path: str | Path,
    *,
    arch: Literal["llama", "qwen2"] = "llama",
    hidden_size: int = 64,
    num_layers: int = 2,
    num_heads: int = 4,
    num_kv_heads: int = 2,
    intermediate_size: int = 128,
    vocab_size: int = 512,
    max_position_embeddings: int = 2048,
    chat_template: str = SMOLLM_STYLE_TEMPLATE,
    seed: int = 0,
    embedding_std: float | None = None,
) -> Path:
    """Create a random-weight model and tokenizer in `path` and return the path.

    The same arguments always give the same weights and tokenizer. `embedding_std` re-draws the (tied)
    embeddings with that spread: the default init (0.02) caps every logit near 1, so no adapter can make
    one token likely; 0.1 gives logits the range a trained model has, which learning tests need.
    """
    import torch
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import AutoModelForCausalLM, LlamaConfig, PreTrainedTokenizerFast, Qwen2Config

    out = Path(path)
    out.mkdir(parents=True, exist_ok=True)

    bpe = Tokenizer(models.BPE())
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    bpe.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=SPECIAL_TOKENS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    bpe.train_from_iterator(_CORPUS * 4, trainer=trainer)
    tokenizer = PreTrainedTokenizerFast(  # type: ignore[no-untyped-call]
        tokenizer_object=bpe,
        bos_token="<|im_start|>",
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
        unk_token="<|endoftext|>",
    )
    tokenizer.chat_template = chat_template
    tokenizer.save_pretrained(out)

    common = dict(
        vocab_size=len(tokenizer),
        hidden_size=hidden_size,
        intermediate_size=intermediate_size,
        num_hidden_layers=num_layers,
        num_attention_heads=num_heads,
        num_key_value_heads=num_kv_heads,
        max_position_embeddings=max_position_embeddings,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
        tie_word_embeddings=True,
    )
    config = LlamaConfig(**common) if arch == "llama" else Qwen2Config(**common)
    torch.manual_seed(seed)
    model = AutoModelForCausalLM.from_config(config, dtype=torch.float32)  # type: ignore[no-untyped-call]
    if embedding_std is not None:
        with torch.no_grad():
            model.get_input_embeddings().weight.normal_(0.0, embedding_std)
    model.generation_config.eos_token_id = tokenizer.eos_token_id
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    model.save_pretrained(out)
    return out
