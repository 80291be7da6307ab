"""`from art.local.backend import LocalBackend`, the reference's module path (the class lives in
`art.backends.local`)."""

from ..backends.local import LocalBackend

__all__ = ["LocalBackend"]
