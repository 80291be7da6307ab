"""`art.serverless.ServerlessBackend`: training through the serverless training API (W&B's, or `art serve`'s
`/v1/preview/` routes), the reference's class. See `art.serverless.backend`."""

from art.backends.serverless import ServerlessBackend

__all__ = ["ServerlessBackend"]
