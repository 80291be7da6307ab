"""Errors with an HTTP status, under the reference's names (`art.errors`).

Each carries `status_code` and `detail` (the message), so a server can answer with them as they are.
`ForbiddenBucketCreationError` is raised by `art.utils.s3.ensure_bucket_exists`;
`UnsupportedBaseModelDeploymentError` and `LoRADeploymentTimedOutError` by `art.utils.deployment`, as in the
reference; `UnsupportedLoRADeploymentProviderError` is raised nowhere (nor in the reference), kept for code
that catches it. Ours: `BaseModelNotFoundError` (a base model that is not there to load, raised by
`art.base_model.check` before anything is written) and `ModelAlreadyRegisteredError` (a record kept for
another base model), both also `ValueError`s.
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


class BaseModelNotFoundError(ARTError, ValueError):
    """A base model that is not there to load: a folder that does not exist, an unknown short name, a Hugging
    Face id neither cached nor downloadable; status 422. `base_model` is what was given, `problem` what was
    tried and `fix` what to do, so a command line can name its own flag (`art.cli.checks.base_model`).

    Example:
        >>> error = BaseModelNotFoundError("/nowhere", "no folder /nowhere", "give a model's folder")
        >>> str(error)
        "base_model '/nowhere': no folder /nowhere; give a model's folder"
        >>> error.status_code
        422
    """

    def __init__(self, base_model: str, problem: str, fix: str) -> None:
        super().__init__(f"base_model {base_model!r}: {problem}; {fix}", status_code=422)
        self.base_model, self.problem, self.fix = base_model, problem, fix


class ModelAlreadyRegisteredError(ARTError, ValueError):
    """A model whose record (`model.json`) was made with another `base_model` (or trainability) than the one
    registering now; nothing was changed; status 409. `field` is the setting that differs, `recorded` its
    value in the record, `given` the new one, `record` the model's folder.

    Example:
        >>> error = ModelAlreadyRegisteredError("demo", "agent", ".art/demo/models/agent", "base_model", "a", "b")
        >>> error.status_code, error.recorded
        (409, 'a')
    """

    def __init__(
        self, project: str, name: str, record: str, field: str, recorded: object, given: object
    ) -> None:
        super().__init__(
            f"model {project}/{name} is already registered in {record} with {field}={recorded!r}, not "
            f"{given!r}; to start a new model give another name= (or another base_path=), to continue this "
            f"one register it with {field}={recorded!r} (nothing was changed)",
            status_code=409,
        )
        self.project, self.name, self.record = project, name, record
        self.field, self.recorded, self.given = field, recorded, given
