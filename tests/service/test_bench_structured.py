"""The structured-output benchmark's quick mode runs every row and its constrained replies parse."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("torch")
pytest.importorskip("llguidance")

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "bench_structured.py"


def test_bench_structured_quick_runs_every_row_and_constrained_replies_parse() -> None:
    result = subprocess.run(
        # our library only (the others are optional installs, `.[grammar-bench]`, and slow to compile)
        [sys.executable, str(SCRIPT), "--quick", "--max-tokens", "40", "--libraries", "llguidance"],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-3000:]
    rows = json.loads(result.stdout.strip().splitlines()[-1])["rows"]
    libraries = {r["library"] for r in rows}
    assert {"free (no grammar)", "llguidance"} <= libraries
    assert {r["batch"] for r in rows} == {1, 4}
    for row in rows:
        assert row["tokens"] > 0 and row["tok_per_s"] > 0
        assert row["parsed"] == row["finished"], row  # every reply a grammar let finish is valid JSON
    assert sum(r["finished"] for r in rows if r["library"] != "free (no grammar)") > 0  # some did finish
