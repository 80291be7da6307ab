"""The shared-prefix prefill benchmark: its quick mode runs both rows and checks they give the same tokens
while computing the shared start once; its full run keeps the promise that sharing is faster (marked
`bench`: `python -m pytest -m bench`)."""

from __future__ import annotations

import pytest
from helpers_bench import assert_targets_met, run_script

pytest.importorskip("torch")

ROWS = ("starts reused (ours)", "every prompt in full")


def _tables(stdout: str) -> tuple[dict[str, list[str]], dict[str, list[str]]]:
    """(the 32-prompt table's rows, the demo table's rows): row name -> cells after the name."""
    rows: dict[str, list[str]] = {}
    demo: dict[str, list[str]] = {}
    for line in stdout.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if cells[0] in ROWS:
            (rows if len(cells) == 4 else demo)[cells[0]] = cells[1:]
    return rows, demo


def test_bench_prefill_quick_computes_the_shared_prefix_once_with_the_same_tokens() -> None:
    result = run_script("bench_prefill.py", "--quick")
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-3000:]
    rows, demo = _tables(result.stdout)
    assert set(demo) == set(ROWS), result.stdout  # the demo's games
    assert "games move for move the same in both rows: 2/2" in result.stdout
    assert set(rows) == set(ROWS), result.stdout
    ours, full = rows[ROWS[0]], rows[ROWS[1]]
    assert int(ours[0]) < int(full[0]) / 2  # 8 prompts sharing most of their tokens
    # The printed ratio is the ratio of the times before they were rounded to 3 decimals (and itself to 2).
    ratio, f, o, r = float(full[2].rstrip("x")), float(full[1]), float(ours[1]), 0.0005
    assert (f - r) / (o + r) - 0.005 <= ratio <= (f + r) / max(o - r, 1e-9) + 0.005, (full, ours)
    assert "first greedy tokens, shared vs in full: 8/8 the same" in result.stdout  # float32: exact
    assert "sharing changes results no more than joining a batch does: yes" in result.stdout


@pytest.mark.bench
def test_prompt_starts_computed_once_prefill_faster_on_the_default_model() -> None:
    result = run_script("bench_prefill.py", timeout=3600)
    assert_targets_met(result)
    rows, demo = _tables(result.stdout)
    assert float(rows[ROWS[1]][2].rstrip("x")) > 1.5, result.stdout  # README: 2.6x
    assert float(demo[ROWS[1]][-1].rstrip("x")) > 1.0, result.stdout
