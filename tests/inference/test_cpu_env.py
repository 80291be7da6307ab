"""The heavy packages bound oneDNN's primitive cache (it grew RSS every training step), unless the user chose."""

from __future__ import annotations

import os
import subprocess
import sys

SCRIPT = "import os, art.training; print(os.environ['ONEDNN_PRIMITIVE_CACHE_CAPACITY'])"


def _run(env: dict[str, str]) -> str:
    return subprocess.run(
        [sys.executable, "-c", SCRIPT], env=env, capture_output=True, text=True, check=True
    ).stdout.strip()


def test_a_bounded_default_and_the_users_value_wins() -> None:
    env = {k: v for k, v in os.environ.items() if k != "ONEDNN_PRIMITIVE_CACHE_CAPACITY"}
    assert _run(env) == "64"
    assert _run({**env, "ONEDNN_PRIMITIVE_CACHE_CAPACITY": "512"}) == "512"
