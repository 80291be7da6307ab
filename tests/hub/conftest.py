"""Fixtures shared by tests/hub: one `art serve` for every Tinker API test of a session (it costs ~20 s to
start on 2 cores; each test makes its own training models on it, so they do not see each other's)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from helpers_serve import ServeProcess, start_serve
from helpers_tinker import COOKBOOK_MODEL


@pytest.fixture(scope="session")
def tinker_served(tmp_path_factory: pytest.TempPathFactory, tiny_model_path: Path) -> Iterator[ServeProcess]:
    """`art serve --device cpu` for the Tinker API tests (the SDK's telemetry off: nothing to report to)."""
    pytest.importorskip("torch", reason="needs the `local` extra: pip install -e '.[local]'")
    pytest.importorskip("tinker", reason="needs the `dev` extra (tinker==0.38): pip install -e '.[dev]'")
    os.environ["TINKER_TELEMETRY"] = "0"
    server = start_serve(
        tmp_path_factory.mktemp("tinker") / "serve",
        "--device", "cpu",
        # the cookbook's recipes know only registry names: this one is the tiny model here
        "--tinker-model", f"{COOKBOOK_MODEL}={tiny_model_path}",
        log_name="tinker",
    )  # fmt: skip
    yield server
    server.stop()


@pytest.fixture(scope="session")
def tinker_service(tinker_served: ServeProcess) -> Iterator[Any]:
    """The official SDK's `ServiceClient` on that server (one session; finished at the end)."""
    import tinker

    with tinker.ServiceClient(base_url=tinker_served.url, api_key=tinker_served.key) as client:
        yield client
