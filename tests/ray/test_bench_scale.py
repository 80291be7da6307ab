"""The scaling benchmark's quick mode runs end to end and prints both tables with their ratios (so the script
never rots). It starts trainer ranks and a two-node Ray cluster: minutes here, so it is `-m cluster`."""

from __future__ import annotations

import re

import pytest
from helpers_bench import assert_ran, run_script

pytest.importorskip("ray", reason="needs the `ray` extra: pip install -e '.[ray]'")
pytest.importorskip("torch")


@pytest.mark.cluster
def test_bench_scale_quick_prints_ranks_and_replicas_side_by_side() -> None:
    result = run_script("bench_scale.py", "--quick", timeout=900)
    assert_ran(result)
    out = result.stdout
    rows = [line for line in out.splitlines() if re.match(r"^\| [12] \| ", line)]
    assert len(rows) == 4, out  # 1 and 2 ranks, 1 and 2 replicas
    for row in rows:
        cells = [float(c) for c in row.strip("|").split("|")]
        assert cells[1] > 0, row  # a measured time: the step, or the round of requests
    assert re.search(r"2 ranks vs 1: step time x[\d.]+, forward\+backward x[\d.]+", out), out
    assert re.search(r"2 replicas vs 1: throughput x[\d.]+", out), out
    assert "what this predicts on GPUs" in out and "MiB of LoRA gradients" in out
