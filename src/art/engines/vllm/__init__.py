"""engine="vllm": vLLM's OpenAI server in a subprocess, behind our server (nothing heavy imported here).

- `locate`          which Python runs vLLM, and the install command when none has it (before any load)
- `server_process`  the subprocess: its command line, environment, health wait, log tail, death
- `vllm_engine`     `VllmEngine`: the `Engine` protocol over the subprocess's HTTP API (adapters as
                    `name@step` via `/v1/load_lora_adapter`, sleep/wake around training on a shared GPU,
                    token-level generate/score via `/v1/completions`)
- `chat_forward`    `/v1/chat/completions` forwarded to vLLM (its chat template and `hermes` tool parser),
                    with token ids and logprobs always requested and our names/aliases mapped
"""
