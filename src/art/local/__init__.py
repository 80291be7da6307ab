"""`from art.local import LocalBackend`, as in the reference system (the class lives in `art.backends.local`)."""

from art.backends.local import LocalBackend

__all__ = ["LocalBackend"]
