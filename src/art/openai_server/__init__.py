"""The OpenAI-compatible front: HTTP over any `Engine` (HTTP lives only here and in `art.hub`).

- `http`              the FastAPI app (`create_app`: /health, /v1/models, the two endpoints) and its uvicorn thread
- `protocol`          OpenAI's wire format as accepted: JSON bodies, request validation, sampling fields
- `chat_messages`     chat messages and tools, checked strictly and normalised for the chat template
- `chat_completions`  POST /v1/chat/completions: rendering, choices, tool calls, streaming chunks
- `completions`       POST /v1/completions: text or token ids in, text and token ids out
- `generation`        what both endpoints share: running choices on an engine, streaming them
- `errors`            errors in OpenAI's shape, never showing the server's insides

It imports the engine protocol (`art.engines.base`) and the shared floor (`art.chat`), never the step
lifecycle (`art.service`) nor an engine implementation.
"""
