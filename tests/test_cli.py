"""`art demo --quick` end to end on a tiny model, through the real CLI (typer), server and trainer."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytest.importorskip("torch", reason="needs the `local` extra: pip install -e '.[local]'")

from typer.testing import CliRunner

from art.cli import app


def test_demo_quick_runs_end_to_end(tiny_model_path: Path, tmp_path: Path) -> None:
    result = CliRunner().invoke(
        app,
        [
            "demo",
            "--quick",
            "--base-model",
            str(tiny_model_path),
            "--base-path",
            str(tmp_path),
            "--name",
            "smoke",
        ],
    )
    assert result.exit_code == 0, result.output + repr(result.exception)
    out = result.output
    from art.examples.tic_tac_toe.train import TABLE_LEGEND, step_header

    assert "SFT on 8 minimax-teacher games (1 epoch(s)) as step 1, then 2 RL steps" in out  # the warm start
    assert step_header(validation=True) in out.splitlines()  # its checkpoint is chosen on validation games
    assert "Best checkpoint on the 4 validation games: step " in out
    assert "Held-out games (8, the same for both)" in out and TABLE_LEGEND in out
    assert "Held-out games, base model (" in out
    root = tmp_path / "demo" / "models" / "smoke"
    history = [json.loads(line) for line in (root / "history.jsonl").read_text().splitlines()]
    assert history[0]["step"] == 0 and "val/win" in history[0]  # the base model's held-out games
    assert any("train/reward" in e for e in history)
    png = root / "plots" / "history.png"  # the plot `art plot` draws too
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    rows = [
        line
        for line in out.splitlines()
        if line.startswith(str(tiny_model_path)) or line.startswith("smoke@")
    ]
    assert len(rows) == 2, out  # base and trained, on the same games

    # It ends by saying where the record is and the exact command lines that open it; they work as printed.
    last = max(e["step"] for e in history if "train/reward" in e)
    show = f"art show {tmp_path} --project demo --name smoke --step {last}"
    assert f"record:  {root}" in out
    assert f"look:    art ui {tmp_path}    (in the browser" in out
    assert f"         {show}    (a group of step {last} in the terminal" in out
    shown = CliRunner().invoke(app, show.split()[1:])
    assert shown.exit_code == 0 and f"demo/smoke · train step {last} · group 0" in shown.output, shown.output
    from art.cli.ui import check_path

    assert check_path(tmp_path) is None  # `art ui PATH` takes it


def test_demo_passes_the_time_budget_and_sft_warmup(monkeypatch: pytest.MonkeyPatch) -> None:
    import art.examples.tic_tac_toe.train as demo_module

    seen = []

    async def fake_run_demo(config, echo=print):  # type: ignore[no-untyped-def]
        seen.append(config)

    monkeypatch.setattr(demo_module, "run_demo", fake_run_demo)
    for args in (
        ["demo", "--sft-warmup"],
        ["demo", "--sft-warmup", "--steps", "1000", "--time-budget-minutes", "30"],
    ):
        result = CliRunner().invoke(app, args)
        assert result.exit_code == 0, result.output + repr(result.exception)
        config = seen.pop()
        # --sft-warmup alone is the measured recipe: RL until 30 minutes of training are spent
        assert (config.time_budget_minutes, config.steps) == (30.0, 1000)
        assert config.sft_games > 0 and config.name == "tic-tac-toe-sft"
    result = CliRunner().invoke(app, ["demo", "--sft-warmup", "--steps", "12", "--time-budget-minutes", "0"])
    assert result.exit_code == 0, result.output + repr(result.exception)
    config = seen.pop()
    assert (config.time_budget_minutes, config.steps) == (0.0, 12)  # a fixed number of steps, no budget
    result = CliRunner().invoke(app, ["demo", "--sft-warmup", "--quick"])
    config = seen.pop()
    assert (config.time_budget_minutes, config.steps) == (0.0, 2)  # --quick stays a smoke run
    result = CliRunner().invoke(app, ["demo"])
    config = seen.pop()  # the warm start: an SFT step, then 7 RL steps
    assert (config.sft_games, config.steps, config.name) == (96, 7, "tic-tac-toe")
    result = CliRunner().invoke(app, ["demo", "--rl-only"])
    config = seen.pop()
    assert (config.sft_games, config.steps, config.name) == (0, 8, "tic-tac-toe-rl")
    both = CliRunner().invoke(app, ["demo", "--rl-only", "--sft-warmup"])
    assert both.exit_code == 2 and seen == []
    assert "--rl-only: cannot be combined with --sft-warmup" in both.output


def test_plot_command_and_its_error(tmp_path: Path) -> None:
    runner = CliRunner()
    bad = runner.invoke(app, ["plot", str(tmp_path)])
    assert bad.exit_code == 2 and "MODEL_DIR: no history.jsonl in" in bad.output
    (tmp_path / "history.jsonl").write_text(
        '{"step": 1, "train/reward": 0.1}\n{"step": 2, "train/reward": 0.3}\n'
    )
    ok = runner.invoke(app, ["plot", str(tmp_path), "--metric", "train/reward"])
    assert ok.exit_code == 0, ok.output
    assert (tmp_path / "plots" / "history.png").exists()


def test_plot_skips_a_torn_history_line(tmp_path: Path) -> None:
    (tmp_path / "history.jsonl").write_text(
        '{"step": 1, "train/reward": 0.1}\n{"step": 2, "train/rew\n{"step": 3, "train/reward": 0.3}\n'
    )
    with pytest.warns(UserWarning, match="line 2 is not a complete JSON object"):
        ok = CliRunner().invoke(app, ["plot", str(tmp_path), "--metric", "train/reward"])
    assert ok.exit_code == 0, ok.output
    assert (tmp_path / "plots" / "history.png").exists()
