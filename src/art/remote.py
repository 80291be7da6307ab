"""`from art.remote import RemoteBackend`: the backend that talks to `art serve` over HTTP."""

from art.backends.remote import RemoteBackend, RemoteError, TrainingJobFailed

__all__ = ["RemoteBackend", "RemoteError", "TrainingJobFailed"]
