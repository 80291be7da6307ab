"""benchmarks/bench_tinker_cookbook.py (tinker-cookbook's sl_basic and rl_basic on the default model through
`art serve`): bad input is one line and exit 2. The recipes themselves run in the suite on the tiny model
(tests/hub/test_tinker_cookbook.py); the default-model run takes ~4 minutes and is quoted in
benchmarks/README.md."""

from __future__ import annotations

import pytest
from helpers_bench import bad_input_line


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["--sl-steps", "0"], "--sl-steps must be >= 1, got 0"),
        (["--rank", "-1"], "--rank must be >= 1, got -1"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(args: list[str], expected: str) -> None:
    assert bad_input_line("bench_tinker_cookbook.py", *args) == expected
