"""`benchmarks/bench_cpu_dtypes.py` runs and prints a ratio for every variant (tiny sizes: seconds)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))


def test_the_dtype_bench_prints_every_variant(capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("torch")
    import bench_cpu_dtypes

    assert bench_cpu_dtypes.main(["--rounds", "1", "--m", "4", "--shapes", "q,down"]) == 0
    out = capsys.readouterr().out
    for variant in ("float32", "bf16", "bf16 weights, fp32 math", "dynamic int8"):
        assert f"\n{variant} " in out
    assert "1.00x" in out
