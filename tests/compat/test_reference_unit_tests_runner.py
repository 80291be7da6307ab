"""benchmarks/reference_unit_tests.py counts a reference checkout's unit tests run against our `art`: passes,
failures, skips, and a file that fails at import counted from its source (parametrize cases included)."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

RUNNER = Path(__file__).resolve().parents[2] / "benchmarks" / "reference_unit_tests.py"


def test_the_runner_counts_passes_failures_skips_and_import_errors(tmp_path: Path) -> None:
    unit = tmp_path / "ref" / "tests" / "unit"
    unit.mkdir(parents=True)
    (unit / "test_ours.py").write_text(
        textwrap.dedent(
            """
            import pytest
            import art

            def test_passes():
                assert art.Trajectory(reward=1.0).reward == 1.0

            async def test_async_passes():  # the reference's asyncio_mode = "auto"
                assert True

            def test_fails():
                assert False

            def test_skips():
                pytest.skip("needs Tinker")
            """
        )
    )
    (unit / "test_missing.py").write_text(
        textwrap.dedent(
            """
            import pytest
            from art.not_a_module import thing

            @pytest.mark.parametrize("x", [1, 2, 3])
            def test_cases(x):
                pass

            class TestGroup:
                def test_one(self):
                    pass
            """
        )
    )
    files = ["tests/unit/test_ours.py", "tests/unit/test_missing.py"]
    done = subprocess.run(
        [sys.executable, str(RUNNER), str(tmp_path / "ref"), "--files", *files, "--show-failures"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert "   2/4    tests/unit/test_ours.py  (failed 1, skipped 1)" in out and "FAILED test_fails" in out
    assert "   0/4    tests/unit/test_missing.py  (failed 4, skipped 0)  import failed" in out
    assert "total: 2/8 passed (25.0%) in 2 files" in out
    assert "runnable here: 2/7 passed (28.6%; 1 skipped)" in out
