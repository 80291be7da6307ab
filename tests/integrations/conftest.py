"""Fixtures of the tracker tests: W&B in offline mode (no network, files under the test's folder)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest


@pytest.fixture
def offline(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[Path]:
    """W&B in offline mode writing under tmp_path (wandb reads its settings once per process: reset)."""
    import wandb

    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_DIR", str(tmp_path))
    monkeypatch.setenv("WANDB_SILENT", "true")
    monkeypatch.delenv("WANDB_API_KEY", raising=False)
    wandb.teardown()
    yield tmp_path / "wandb"
    wandb.teardown()
