"""Where `art serve` keeps its own state under its `--path`: `.serve/` (its key, the models it serves)."""

from __future__ import annotations

import os
from pathlib import Path


def serve_dir(base_path: str | os.PathLike[str]) -> Path:
    """Where `art serve` keeps its own state under `base_path` (its key, the models it serves)."""
    return Path(base_path) / ".serve"


def serve_api_key_path(base_path: str | os.PathLike[str]) -> Path:
    """The default key file of `art serve --path base_path`."""
    return serve_dir(base_path) / "api_key"


def serve_models_path(base_path: str | os.PathLike[str]) -> Path:
    """The list of models `art serve --path base_path` serves (restored at its next start)."""
    return serve_dir(base_path) / "models.json"
