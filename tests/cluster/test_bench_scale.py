"""The scaling benchmark's quick mode runs end to end and prints both tables with their ratios, DDP and FSDP2
ranks side by side (so the script never rots). It starts trainer ranks and a two-node Ray cluster: minutes
here, so it is `-m cluster`."""

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
    rows = [line for line in out.splitlines() if re.match(r"^\| (1|2|2 ddp|2 fsdp2) \| ", line)]
    # 1 rank, 2 DDP ranks, 2 FSDP2 ranks; 1 and 2 replicas
    assert [row.split("|")[1].strip() for row in rows] == ["1", "2 ddp", "2 fsdp2", "1", "2"], out
    for row in rows:
        cells = row.strip("|").split("|")
        assert float(cells[1]) > 0, row  # a measured time: the step, or the round of requests
    ddp, fsdp2 = ([float(c) for c in row.strip("|").split("|")[5:]] for row in rows[1:3])
    assert ddp[0] > 0 and fsdp2[0] > 0, rows  # each rank's peak memory, measured
    assert 0.45 < fsdp2[2] / ddp[2] < 0.55, rows  # an FSDP2 rank holds half the weights a DDP rank holds
    assert re.search(r"2 ranks vs 1: step time x[\d.]+, forward\+backward x[\d.]+", out), out
    assert re.search(r"fsdp2 vs ddp \(2 ranks\): step time x[\d.]+, forward\+backward x[\d.]+", out), out
    assert re.search(r"2 replicas vs 1: throughput x[\d.]+", out), out
    assert re.search(r"fsdp2 moves x\d+ the bytes ddp moves per step", out), out
    assert "what this predicts on GPUs" in out and "MiB of LoRA gradients" in out
