"""Chat-shaped text <-> tokens, shared by every engine and the trainer (light: no torch).

- `chat_template`  rendering messages + tools to token ids with the model's template (what the engine
                   prompts with is what the trainer re-renders, token for token)
- `detokenize`     incremental text, stop strings, token bytes
- `tool_calls`     Hermes/Qwen `<tool_call>{json}</tool_call>` parsing, streamed or whole
"""
