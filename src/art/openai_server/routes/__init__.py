"""The routes of the OpenAI-compatible HTTP front, one module per concern, each a module-level `APIRouter`.

`health` (`GET /health`), `models` (`GET /v1/models`), `chat_completions` (`POST /v1/chat/completions`,
handed whole to an engine that serves chat itself, e.g. vLLM's), `completions` (`POST /v1/completions`).
Every route takes what the app serves as a dependency (`shared.Front`: its engines, body limit and
preparation thread), so no route closes over an engine; `art.openai_server.http.create_app` attaches it and
includes `ROUTERS`. A new route is a new module plus its line in `ROUTERS`.
"""

from __future__ import annotations

from art.openai_server.routes import chat_completions, completions, health, models

ROUTERS = (health.router, models.router, chat_completions.router, completions.router)
"""Every router of the front, in the order `create_app` includes them."""
