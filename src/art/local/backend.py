"""`from art.local.backend import LocalBackend`, the reference's module path (the class lives in
`art.backends.local`). Like the reference's module it has `torch` (None when torch is not installed), which
code written for the reference patches (`art.local.backend.torch.cuda.is_available`), and its helpers for a
model's configured chat template (`_internal_config["chat_template"]` or `["chat_template_path"]`).
"""

from collections.abc import Mapping
from typing import Any

from ..backends.internal_config import configured_chat_template
from ..backends.local import LocalBackend

torch: Any
try:
    import torch
except ImportError:  # the light install: LocalBackend then says what to install when it starts a model
    torch = None


def _apply_configured_chat_template(tokenizer: Any, internal_config: Mapping[str, Any]) -> None:
    """Set `tokenizer.chat_template` to the model's configured template, if it has one (the reference's
    helper; LocalBackend applies it to the model it serves and trains)."""
    template = configured_chat_template(internal_config)
    if template is not None:
        tokenizer.chat_template = template


def _apply_configured_chat_template_server_args(
    config_dict: dict[str, Any], internal_config: Mapping[str, Any]
) -> None:
    """Add the configured template to a vLLM server config's `server_args` (a path, or the text), with its
    `chat_template_content_format`; what `server_args` already sets wins (the reference's helper)."""
    text, path = internal_config.get("chat_template"), internal_config.get("chat_template_path")
    if text is not None and path is not None:
        configured_chat_template(internal_config)  # raises, naming both
    template = path or text
    if template is None:
        return
    server_args = dict(config_dict.get("server_args") or {})
    server_args.setdefault("chat_template", template)
    if content_format := internal_config.get("chat_template_content_format"):
        server_args.setdefault("chat_template_content_format", content_format)
    config_dict["server_args"] = server_args


def _tokenizer_cache_key(base_model: str, internal_config: Mapping[str, Any]) -> tuple[str, str | None]:
    """(base model, the configured template's text): two models share a tokenizer only when both match."""
    return base_model, configured_chat_template(internal_config)


__all__ = ["LocalBackend"]
