"""Running a benchmark script from a test, and telling a crash from a missed target.

The scripts exit 0 when every target they measure is met and 1 when one is not, but an uncaught exception
also exits 1: `assert_ran` accepts a 1 only with a "NOT met" target line and no traceback. Tests that
check a benchmark's promise (timing, memory) are marked `bench`: excluded from the default run, run on a
quiet machine with `python -m pytest -m bench` (they run the full benchmark, minutes each).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"


def run_script(name: str, *args: str, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    """`python benchmarks/{name} {args}` offline, its output captured."""
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "WANDB_MODE": "disabled"}
    return subprocess.run(
        [sys.executable, str(BENCHMARKS / name), *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
    )


def bad_input_line(name: str, *args: str) -> str:
    """Run `benchmarks/{name}` with bad `args`: it must exit 2 with exactly one line of output; that line."""
    result = run_script(name, *args, timeout=120)
    lines = (result.stdout + result.stderr).strip().splitlines()
    assert result.returncode == 2, result.stdout + result.stderr
    assert len(lines) == 1, lines
    return lines[0]


def assert_ran(result: subprocess.CompletedProcess[str]) -> None:
    """The script ran to its end: exit 0, or exit 1 because a target was not met (not because it crashed)."""
    tail = result.stdout[-3000:] + result.stderr[-3000:]
    assert "Traceback" not in result.stderr, tail
    assert result.returncode == 0 or (result.returncode == 1 and "NOT met" in result.stdout), tail


def assert_targets_met(result: subprocess.CompletedProcess[str]) -> None:
    """Every target the script measured is met (exit 0, no "NOT met" line)."""
    assert result.returncode == 0 and "NOT met" not in result.stdout, (
        result.stdout[-4000:] + result.stderr[-3000:]
    )
