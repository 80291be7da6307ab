"""`from art.local import LocalBackend`, as in the reference system."""

from .backends.local import LocalBackend

__all__ = ["LocalBackend"]
