"""benchmarks/bench_email_agent.py (issue 56 item 6): its --quick run, on a tiny model made on the spot, times
both rows (one at a time, a step's at once) with the model's and the tools' shares and writes the JSON
results; bad input is one line and exit 2."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from helpers_bench import bad_input_line, run_script

pytest.importorskip("torch", reason="needs the `local` extra")


def test_quick_run_measures_rollouts_per_minute_and_the_tools_share(tmp_path: Path) -> None:
    result = run_script("bench_email_agent.py", "--quick", "--out-dir", str(tmp_path), timeout=300)
    out = result.stdout
    assert result.returncode == 0, out[-3000:] + result.stderr[-3000:]
    assert re.search(r"^host: .+CPUs", out, re.M), out
    for name, n in (("one at a time", 1), (r"a step's at once \(1x2\)", 2)):
        row = re.search(rf"^{name} +{n} +(\d+\.\d) +(\d+\.\d\d) +(\d+\.\d)% +(\d+\.\d\d)% ", out, re.M)
        assert row, out
        wall, per_min, model, tools = map(float, row.groups())
        assert wall > 0 and per_min > 0 and 0 < model <= 100 and 0 < tools < 100  # the tools ran
    assert re.search(
        r"^tools alone \(the scripted expert's calls, 21 questions, \d\.\d\d calls each\): ", out, re.M
    )
    (path,) = tmp_path.glob("bench_email_agent-quick-*.json")
    payload = json.loads(path.read_text())
    assert payload["task"]["prefill_read"] is True and payload["inbox_emails"] == 160
    expert = payload["expert_tools"]
    assert expert["episodes"] == expert["calls"]["return_final_answer"] == 21 and expert["ms_per_episode"] > 0
    one, step = payload["rows"]
    assert (one["rollouts"], step["rollouts"]) == (1, 2)
    for row in (one, step):
        assert row["tool_calls"] == {"search_emails": row["rollouts"], "read_email": row["rollouts"]}
        assert row["model_calls"] == row["rollouts"]  # one turn each
        assert abs(row["model_share"] + row["tool_share"] + row["other_share"] - 1) < 1e-6
        assert row["rollouts_per_min"] == pytest.approx(row["rollouts"] / row["wall_s"] * 60)


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["--groups", "0"], "bench_email_agent.py: error: --groups: must be at least 1, got 0"),
        (["--sequential", "x"], "bench_email_agent.py: error: argument --sequential: invalid int value"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(args: list[str], expected: str) -> None:
    assert bad_input_line("bench_email_agent.py", *args).startswith(expected)
