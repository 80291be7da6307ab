"""The thread-layout benchmark, all `bench` (excluded from the default run; `python -m pytest -m bench`): its
quick mode runs both layouts end to end and prints its table; its full run keeps the promise that one
computing thread decodes faster than two."""

from __future__ import annotations

import re

import pytest
from helpers_bench import run_script

pytest.importorskip("torch")

LAYOUTS = ("one thread (ours)", "two threads (before)")
SUMMARY = re.compile(r"one thread vs two \(median over rounds\): decode step ([\d.]+)x faster")


def _rows(stdout: str) -> dict[str, list[float]]:
    rows = {}
    for line in stdout.splitlines():
        cells = [c.strip() for c in line.strip("|").split("|")]
        if len(cells) == 4 and cells[0] in LAYOUTS:
            rows[cells[0]] = [float(c) for c in cells[1:]]
    return rows


@pytest.mark.bench  # 74 s of CPU (four fresh processes): see tests/helpers_bench.py
def test_bench_threads_quick_prints_both_layouts_and_the_ratios() -> None:
    result = run_script("bench_threads.py", "--quick", "--rounds", "1")
    assert result.returncode == 0, result.stderr[-3000:]
    rows = _rows(result.stdout)
    assert set(rows) == set(LAYOUTS), result.stdout
    assert all(v > 0 for values in rows.values() for v in values)
    ratio = SUMMARY.search(result.stdout)
    assert ratio, result.stdout  # with one round, the ratio is the two rows' decode times
    assert float(ratio.group(1)) == pytest.approx(
        rows[LAYOUTS[1]][0] / rows[LAYOUTS[0]][0], rel=0.05, abs=0.05
    )


@pytest.mark.bench
def test_one_computing_thread_decodes_faster_than_two() -> None:
    result = run_script("bench_threads.py", timeout=3600)
    assert result.returncode == 0, result.stderr[-3000:]
    ratio = SUMMARY.search(result.stdout)
    assert ratio and float(ratio.group(1)) > 1.0, result.stdout
