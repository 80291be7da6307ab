"""The service checks its environment switches when it starts, before loading or training anything."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from art.service.service import ModelService, ServiceConfig
from art.storage import ModelStorage
from art.types import LoRAConfig


def test_a_bad_release_setting_fails_at_start_and_names_the_fix(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ART_RELEASE_MEMORY", "sometimes")
    storage = ModelStorage(tmp_path, "p", "m")
    service = ModelService(
        "m", storage, ServiceConfig(base_model=str(tmp_path / "no-such-model"), lora=LoRAConfig())
    )
    with pytest.raises(ValueError, match=r"ART_RELEASE_MEMORY='sometimes'.*'always' or 'never'"):
        asyncio.run(service.start())  # not a loading error: the model folder does not even exist
    assert service.engine is None
