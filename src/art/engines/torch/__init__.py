"""The built-in engine: a PyTorch model served in this process (the CPU default).

Nothing is imported here; import the modules you need:

- `torch_engine`    `TorchEngine`: load, names/adapters/aliases, generate, pause, score
- `scheduler`       continuous batching in one worker thread
- `llama_forward`   the compact Llama/Mistral/Qwen2/Qwen3 forward over the slot KV cache (`kv_cache`, `rope`)
- `prefix_cache`    finished sequences' keys and values, restored for the next turn of a conversation
- `decode_attention` the decode step's attention (C++, inductor or eager kernel, chosen and checked once)
- `lora`            reading PEFT adapters; several adapters in one batch
- `folded_lora`     adapters folded into the base matmuls for generation
- `sampling`        per-row temperature/top_p/seed sampling with a counter-based RNG
- `random_adapter`  random LoRA adapters for tests and benchmarks

Chat templates and tool-call parsing live in `art.chat`, the C++ kernels in `art.kernels`, model loading
in `art.base_model`: the trainer shares those and imports nothing from here.
"""
