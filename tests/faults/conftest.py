"""The fault suite's children come from one forkserver (see fault_runs.py), stopped after the suite."""

from __future__ import annotations

from collections.abc import Iterator

import pytest


@pytest.fixture(scope="module", autouse=True)
def _forkserver_stopped_after_the_module() -> Iterator[None]:
    yield
    from fault_runs import stop_forkserver

    stop_forkserver()
