"""Engine protocol, the built-in torch engine, chat templates and tool-call parsing (heavy side).

Nothing is imported here, so `import art.inference` stays light; import the modules you need:

- `engine`          the `Engine` protocol, `SamplingParams`, `GenerateRequest`, `GenerateOutput`, errors
- `torch_engine`    `TorchEngine`: the built-in engine (load, names/adapters/aliases, generate, pause, score)
- `scheduler`       continuous batching in one worker thread
- `llama_forward`   the compact Llama/Mistral/Qwen2/Qwen3 forward over the slot KV cache (`kv_cache`, `rope`)
- `lora`            reading PEFT adapters; several adapters in one batch
- `sampling`        per-row temperature/top_p/seed sampling with a counter-based RNG
- `detokenize`      incremental text, stop strings, token bytes;  `tool_calls`: Hermes tool-call parsing
- `chat_template`   rendering messages + tools to token ids (shared with the trainer)
- `loader`          model/tokenizer loading and dtype choice;  `default_model`: the embedded default model
- `packed_linear`   oneDNN-prepacked bf16 matmul weights;  `allocator`: giving freed memory back
- `random_adapter`  random LoRA adapters for tests and benchmarks
"""
