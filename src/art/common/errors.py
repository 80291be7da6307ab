"""Errors with an HTTP status, under the reference's names (`art.errors`).

Each carries `status_code` and `detail` (the message), so a server can answer with them as they are.
`ForbiddenBucketCreationError` is raised by `art.utils.s3.ensure_bucket_exists`;
`UnsupportedBaseModelDeploymentError` and `LoRADeploymentTimedOutError` by `art.utils.deployment`, as in the
reference; `UnsupportedLoRADeploymentProviderError` is raised nowhere (nor in the reference), kept for code
that catches it.
"""

from __future__ import annotations


class ARTError(Exception):
    """An error that maps to an HTTP status: `status_code` and `detail` (the message).

    Example:
        >>> ARTError("no such model", status_code=404).status_code
        404
    """

    def __init__(self, message: str, status_code: int) -> None:
        super().__init__(message)
        self.detail = message
        self.status_code = status_code


class ForbiddenBucketCreationError(ARTError):
    """An S3 bucket does not exist and could not be created (it may belong to another account, or the
    credentials may not allow it); status 403.

    Example:
        >>> ForbiddenBucketCreationError("bucket 'x' is taken").status_code
        403
    """

    def __init__(self, message: str) -> None:
        super().__init__(message, status_code=403)


class UnsupportedLoRADeploymentProviderError(ARTError):
    """A deployment provider that cannot serve LoRA adapters serverlessly; status 400.

    Example:
        >>> UnsupportedLoRADeploymentProviderError("no LoRA serving").status_code
        400
    """

    def __init__(self, message: str) -> None:
        super().__init__(message, status_code=400)


class UnsupportedBaseModelDeploymentError(ARTError):
    """A provider that cannot deploy LoRA adapters of this base model; status 400.

    Example:
        >>> UnsupportedBaseModelDeploymentError("base model not offered").status_code
        400
    """

    def __init__(self, message: str) -> None:
        super().__init__(message, status_code=400)


class LoRADeploymentTimedOutError(ARTError):
    """Deploying a LoRA adapter took too long; status 504.

    Example:
        >>> LoRADeploymentTimedOutError("gave up after 10 min").status_code
        504
    """

    def __init__(self, message: str) -> None:
        super().__init__(message, status_code=504)
