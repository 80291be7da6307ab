"""Tinker's names for things, and the record's.

A training model is `{session}:train:{n}` (the SDK builds this form itself when it loads a state), kept as
the record `tinker/{session}-train-{n}`; a checkpoint is `tinker://{model_id}/{kind}/{name}` with kind
`weights` (save_state: adapter and optimizer) or `sampler_weights` (save_weights_for_sampler), both of them
an ordinary checkpoint step of that record; a sampler is `{session}:sample:{n}`.
"""

from __future__ import annotations

import re
import secrets
from dataclasses import dataclass

PROJECT = "tinker"
"""The record project of every model trained through the Tinker API."""

KINDS = {"weights": "training", "sampler_weights": "sampler"}
"""A tinker path's kind -> the SDK's `checkpoint_type`."""

_MODEL_ID = re.compile(r"^(tk[0-9a-f]{12}):train:(\d{1,6})$")
_NAME = re.compile(r"^[A-Za-z0-9._-]{1,128}$")


class NotFound(LookupError):
    """Something a request names does not exist here; the message names it (HTTP 404)."""


class BadInput(ValueError):
    """A request this server refuses as given; the message says why (HTTP 400)."""


def new_session_id() -> str:
    return f"tk{secrets.token_hex(6)}"


def is_session_id(session_id: str) -> bool:
    """Whether `session_id` has the form this server gives its sessions."""
    return re.fullmatch(r"tk[0-9a-f]{12}", session_id) is not None


def model_id(session_id: str, seq: int) -> str:
    return f"{session_id}:train:{seq}"


def record_name(model_id_: str) -> str:
    """The record name of a training model id (NotFound when the id is not one this server makes)."""
    match = _MODEL_ID.match(model_id_)
    if match is None:
        raise NotFound(
            f"no training model {model_id_!r} on this server (ids look like tk0123456789ab:train:0)"
        )
    return f"{match.group(1)}-train-{match.group(2)}"


def check_name(name: str) -> str:
    """A checkpoint name as a tinker path allows it here: letters, digits, `.`, `_`, `-` (BadInput otherwise)."""
    if not _NAME.match(name):
        raise BadInput(f"checkpoint name {name!r}: use 1-128 letters, digits, '.', '_' or '-'")
    return name


@dataclass(frozen=True)
class TinkerPath:
    """`tinker://{model_id}/{kind}/{name}`."""

    model_id: str
    kind: str
    name: str

    @property
    def checkpoint_id(self) -> str:
        return f"{self.kind}/{self.name}"

    def __str__(self) -> str:
        return f"tinker://{self.model_id}/{self.kind}/{self.name}"

    @classmethod
    def parse(cls, path: str) -> TinkerPath:
        """NotFound naming `path` unless it is a checkpoint path this server could have made."""
        parts = path.removeprefix("tinker://").split("/")
        if not path.startswith("tinker://") or len(parts) != 3 or parts[1] not in KINDS:
            raise NotFound(
                f"no checkpoint {path!r} on this server (paths look like tinker://<model id>/weights/<name> "
                "or .../sampler_weights/<name>)"
            )
        record_name(parts[0])
        return cls(parts[0], parts[1], parts[2])
