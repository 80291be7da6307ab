"""Engine protocol, the built-in torch engine, chat templates and tool-call parsing (heavy side).

Nothing heavy is imported here (only CPU-library defaults are set: `cpu_env`); import the modules you need:

- `engine`          the `Engine` protocol, `SamplingParams`, `GenerateRequest`, `GenerateOutput`, errors
- `torch_engine`    `TorchEngine`: the built-in engine (load, names/adapters/aliases, generate, pause, score)
- `scheduler`       continuous batching in one worker thread
- `llama_forward`   the compact Llama/Mistral/Qwen2/Qwen3 forward over the slot KV cache (`kv_cache`, `rope`)
- `decode_attention` the decode step's attention (C++, inductor or eager kernel, chosen and checked once)
- `cpp_kernels`     C++ kernels for decode steps (attention, RMSNorm, SwiGLU, rope, LoRA), torch fallback
- `lora`            reading PEFT adapters; several adapters in one batch
- `folded_lora`     adapters folded into the base matmuls for generation
- `sampling`        per-row temperature/top_p/seed sampling with a counter-based RNG
- `detokenize`      incremental text, stop strings, token bytes;  `tool_calls`: Hermes tool-call parsing
- `chat_template`   rendering messages + tools to token ids (shared with the trainer)
- `loader`          model/tokenizer loading and dtype choice;  `default_model`: the embedded default model
- `packed_linear`   oneDNN-prepacked bf16 matmul weights;  `allocator`: giving freed memory back
- `random_adapter`  random LoRA adapters for tests and benchmarks
"""

from art.inference.cpu_env import configure as _configure_cpu_libraries

_configure_cpu_libraries()
