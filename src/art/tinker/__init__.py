"""`from art.tinker import TinkerBackend`: the reference's path (its `art.tinker` package) to `art.TinkerBackend`
(`art.backends.tinker`; docs/tinker.md)."""

from art.backends.tinker import TinkerBackend

__all__ = ["TinkerBackend"]
