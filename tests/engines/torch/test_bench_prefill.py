"""The shared-prefix prefill benchmark's quick mode runs both rows and checks they give the same tokens."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("torch")

SCRIPT = Path(__file__).resolve().parents[3] / "benchmarks" / "bench_prefill.py"


def test_bench_prefill_quick_computes_the_shared_prefix_once_with_the_same_tokens() -> None:
    result = subprocess.run(
        [sys.executable, str(SCRIPT), "--quick"], capture_output=True, text=True, timeout=600
    )
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-3000:]
    rows, demo = {}, {}
    for line in result.stdout.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if cells[0] in ("starts reused (ours)", "every prompt in full"):
            (rows if len(cells) == 4 else demo)[cells[0]] = cells[1:]
    assert set(demo) == {"starts reused (ours)", "every prompt in full"}, result.stdout  # the demo's games
    assert "games move for move the same in both rows: 2/2" in result.stdout
    assert set(rows) == {"starts reused (ours)", "every prompt in full"}, result.stdout
    ours, full = int(rows["starts reused (ours)"][0]), int(rows["every prompt in full"][0])
    assert ours < full / 2  # 8 prompts sharing most of their tokens
    assert rows["starts reused (ours)"][2] == "1.00x"
    assert "first greedy tokens, shared vs in full: 8/8 the same" in result.stdout  # float32: exact
    assert "sharing changes results no more than joining a batch does: yes" in result.stdout
