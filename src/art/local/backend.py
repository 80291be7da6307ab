"""`from art.local.backend import LocalBackend`, the reference's module path (the class lives in
`art.backends.local`). Like the reference's module it has `torch` (None when torch is not installed), which
code written for the reference patches (`art.local.backend.torch.cuda.is_available`)."""

from typing import Any

from ..backends.local import LocalBackend

torch: Any
try:
    import torch
except ImportError:  # the light install: LocalBackend then says what to install when it starts a model
    torch = None

__all__ = ["LocalBackend"]
