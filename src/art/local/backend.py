"""`from art.local.backend import LocalBackend`, the reference's module path (the class lives in
`art.backends.local`). Like the reference's module it has `torch` (None when torch is not installed), which
code written for the reference patches (`art.local.backend.torch.cuda.is_available`), and its helpers for a
model's configured chat template (`_internal_config["chat_template"]` or `["chat_template_path"]`),
which live in `art.backends.internal_config`.
"""

from typing import Any

from art.backends.internal_config import (
    _apply_configured_chat_template as _apply_configured_chat_template,
)
from art.backends.internal_config import (
    _apply_configured_chat_template_server_args as _apply_configured_chat_template_server_args,
)
from art.backends.internal_config import _tokenizer_cache_key as _tokenizer_cache_key
from art.backends.local import LocalBackend

torch: Any
try:
    import torch
except ImportError:  # the light install: LocalBackend then says what to install when it starts a model
    torch = None


__all__ = ["LocalBackend"]
