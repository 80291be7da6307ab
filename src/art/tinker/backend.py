"""`from art.tinker.backend import TinkerBackend`: the reference's module path to `art.TinkerBackend`."""

from art.backends.tinker import TinkerBackend

__all__ = ["TinkerBackend"]
