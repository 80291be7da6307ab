"""benchmarks/bench_e2e.py (time to target, ART vs TRL's GRPOTrainer): its --quick run trains both arms and
writes the table, the JSON results and the plot; bad input is one line and exit 2."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from helpers_bench import bad_input_line, run_script

pytest.importorskip("torch", reason="needs the `local` extra")
pytest.importorskip("trl", reason="needs the `dev` extra (trl)")


def test_quick_run_times_both_arms_and_writes_json_and_png(tmp_path: Path) -> None:
    result = run_script("bench_e2e.py", "--quick", "--out-dir", str(tmp_path), timeout=900)
    out = result.stdout
    assert result.returncode == 0, out[-3000:] + result.stderr[-3000:]
    row = re.search(
        r"^\s+0 \| +(\S+) +(\d+) +(\d\.\d+) \| +(\S+) +(\d+) +(\d\.\d+) \| +(\d+\.\d+)$", out, re.M
    )
    assert row, out
    assert float(row.group(1)) > 0 and float(row.group(4)) > 0, out  # real timings for both arms
    assert "median TRL/ART time to target:" in out
    for arm in ("ART", "TRL"):  # each trained its two steps
        assert re.search(rf"^\[{arm} seed 0 lr \S+\] step 2: clock \d+\.\d+ min", out, re.M), out
    (json_path,) = tmp_path.glob("bench_e2e-adder-quick-*.json")
    (png_path,) = tmp_path.glob("bench_e2e-adder-quick-*.png")
    assert png_path.read_bytes()[:4] == b"\x89PNG"
    payload = json.loads(json_path.read_text())
    assert payload["host"] in ("avx512_bf16", "avx512f", "avx2", "other")
    assert payload["lr"]["ART"] > 0 and payload["lr"]["TRL"] > 0 and payload["lr"]["why"]
    (run,) = payload["runs"]
    for arm in ("ART", "TRL"):
        assert not run[arm]["error"]
        assert [p[1] for p in run[arm]["points"]] == [0, 1, 2]
        assert all(p[0] > 0 for p in run[arm]["points"])


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["--task", "chess"], "accepted values: adder"),
        (["--task", "tic-tac-toe"], "TRL 1.16's GRPOTrainer"),
        (["--target", "1.5"], "accepted values: a held-out mean reward in (0, 1]"),
        (["--target", "abc"], "--target"),
        (["--budget-minutes", "0"], "accepted values: minutes per run"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(args: list[str], expected: str) -> None:
    assert expected in bad_input_line("bench_e2e.py", *args)


def test_trl_not_importable_names_the_install_command(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake = tmp_path / "trl"
    fake.mkdir()
    (fake / "__init__.py").write_text("raise ImportError('no trl here')\n")
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))
    result = run_script("bench_e2e.py", "--quick", "--out-dir", str(tmp_path), timeout=120)
    lines = (result.stdout + result.stderr).strip().splitlines()
    assert result.returncode == 2, result.stdout + result.stderr
    assert lines == ['TRL is not importable: pip install "trl>=1.16,<2"'], lines
