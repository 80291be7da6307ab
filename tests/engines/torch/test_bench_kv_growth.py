"""The KV-growth benchmark: in its quick mode the engine's growth keeps the cache at what its tokens need,
and the old way (the whole extent copied) measurably does not, side by side in one run."""

from __future__ import annotations

import os
import re

import pytest
from helpers_bench import run_script

pytest.importorskip("torch")


@pytest.mark.skipif(not os.path.exists("/proc/self/statm"), reason="reads RSS from Linux's /proc")
def test_quick_run_meets_its_target_and_shows_the_difference() -> None:
    result = run_script("bench_kv_growth.py", "--quick")
    assert result.returncode == 0, result.stdout + result.stderr[-3000:]
    ratios = {
        m.group(1).strip(): float(m.group(2))
        for m in re.finditer(r"^(copy .+?)\s+[\d.]+\s+[\d.]+\s+([\d.]+)x$", result.stdout, re.MULTILINE)
    }
    assert set(ratios) == {"copy the whole old extent (before)", "copy what slots hold (ours)"}, result.stdout
    assert ratios["copy what slots hold (ours)"] <= 1.5
    assert ratios["copy the whole old extent (before)"] > 4 * ratios["copy what slots hold (ours)"]
