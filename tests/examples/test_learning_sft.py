"""`benchmarks/learning.py --sft-warmup --quick` on a tiny model: every arm runs and the table is printed."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from helpers_scripts import load_script

pytest.importorskip("torch", reason="needs the `local` extra: pip install -e '.[local]'")

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow
@pytest.mark.timeout(1800)  # four demo runs in a subprocess; ~90 s on a quiet 2-core host
def test_sft_warmup_benchmark_quick(tiny_model_path: Path, tmp_path: Path) -> None:
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "ART_TRAIN_COMPILE": "0"}
    result = subprocess.run(
        [
            sys.executable, str(ROOT / "benchmarks" / "learning.py"), "--sft-warmup", "--quick",
            "--model", str(tiny_model_path), "--seeds", "0", "--val-games", "4",
            "--base-path", str(tmp_path / "runs"),
        ],
        env=env, capture_output=True, text=True, timeout=1500,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    out = result.stdout
    for arm in ("base", "SFT only", "RL only", "SFT then RL"):
        assert any(
            line.startswith(f"{arm} ") and line.split()[len(arm.split())] == "0" for line in out.splitlines()
        ), (arm, out)
    assert "goal (SFT then RL" in out and "load average" in out
    sft_only_output = out.split("=== seed 0: SFT only ===")[1].split("=== seed 0: RL only ===")[0]
    assert "SFT on 4 teacher games" in sft_only_output
    assert "train reward" not in sft_only_output  # no empty RL table, no RL legend
    assert "train reward" in out.split("=== seed 0: RL only ===")[1]
    runs = tmp_path / "runs" / "demo" / "models"

    def history(name: str) -> list[dict[str, float]]:
        return [json.loads(line) for line in (runs / name / "history.jsonl").read_text().splitlines()]

    # SFT only: one checkpoint trained from the teacher's file, no RL.
    assert (runs / "sft-only-seed-0" / "sft" / "teacher-0.jsonl").is_file()
    assert any(e["step"] == 1 and "loss/train" in e for e in history("sft-only-seed-0"))
    assert not any("data/step_num_groups_trainable" in e for e in history("sft-only-seed-0"))
    # SFT then RL: the warm-up is step 1, then an RL step on the same adapter (a random tiny model loses
    # every game, so that step has nothing to learn from: as in the reference, it still advances the step,
    # serving the unchanged adapter, and says why).
    assert any(e["step"] == 1 and "loss/train" in e for e in history("sft-then-rl-seed-0"))
    assert any(
        e["step"] == 2 and "data/step_num_groups_trainable" in e for e in history("sft-then-rl-seed-0")
    )
    assert any("data/step_num_groups_trainable" in e for e in history("rl-only-seed-0"))
    assert not any("loss/train" in e for e in history("rl-only-seed-0"))
    # Every trained arm validated its checkpoints on the selection games and reported one of them.
    for name in ("sft-only-seed-0", "rl-only-seed-0", "sft-then-rl-seed-0"):
        assert any("select/reward" in e for e in history(name)), name
    assert "picked" in out


def test_arms_are_checked_before_any_model_work() -> None:
    script = str(ROOT / "benchmarks" / "learning.py")
    bad = subprocess.run(
        [sys.executable, script, "--sft-warmup", "--arms", "SFT twice"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert bad.returncode == 2
    assert "invalid choice: 'SFT twice'" in bad.stderr and "'SFT then RL'" in bad.stderr


def test_sft_then_rl_arm_trains_rl_at_the_warm_up_rate_and_rl_only_with_the_rl_alone_recipe() -> None:
    import argparse

    from art.examples.tic_tac_toe.train import RL_ALONE, SFT_THEN_RL_LEARNING_RATE, DemoConfig

    learning = load_script("benchmarks/learning.py", "learning_bench")
    args = argparse.Namespace(
        model="m", base_path="p", budget_minutes=30.0, sft_games=96, sft_epochs=2, select_games=32,
        select_every=4, sft_learning_rate=None, learning_rate=None, val_games=None, quick=False,
        plain_rl=False,
    )  # fmt: skip
    assert learning.arm_config("SFT then RL", 0, args).learning_rate == SFT_THEN_RL_LEARNING_RATE
    rl_alone = learning.arm_config("RL only", 0, args)
    assert {key: getattr(rl_alone, key) for key in RL_ALONE} == RL_ALONE
    assert rl_alone.max_opponent_skill > rl_alone.opponent_skill  # the opponent grows with the policy
    sft_then_rl = learning.arm_config("SFT then RL", 0, args)
    assert (sft_then_rl.max_opponent_skill, sft_then_rl.resample_rounds) == (
        0.0,
        0,
    )  # the recipe is RL only's
    args.plain_rl = True  # --plain-rl: the demo's RL steps as they are
    plain = learning.arm_config("RL only", 0, args)
    assert (plain.learning_rate, plain.max_opponent_skill) == (DemoConfig().learning_rate, 0.0)
    args.plain_rl = False
    args.learning_rate = 1e-4  # --learning-rate sets every arm's
    assert learning.arm_config("SFT then RL", 0, args).learning_rate == 1e-4
    assert learning.arm_config("RL only", 0, args).learning_rate == 1e-4
    args.max_opening_plies, args.opponent_skill = 4, 0.5  # the RL knobs reach every arm's config
    rl = learning.arm_config("RL only", 0, args)
    assert (rl.max_opening_plies, rl.opponent_skill) == (4, 0.5)


def test_the_goal_line_says_not_measured_when_its_arm_did_not_run(capsys: pytest.CaptureFixture[str]) -> None:

    from art.examples.tic_tac_toe.train import EvalResult

    learning = load_script("benchmarks/learning.py", "learning_bench")

    def row(arm: str, win: float, illegal: float) -> tuple[str, int, EvalResult, float, int, int]:
        return (arm, 0, EvalResult(arm, 64, win, 0.0, 1 - win, illegal, win), 29.0, 10, 10)

    def goal_line(arm: str) -> str:
        return next(line for line in capsys.readouterr().out.splitlines() if line.startswith(f"goal ({arm}"))

    learning.print_arms_table([row("SFT only", 0.9, 0.0), row("RL only", 0.6, 0.2)], 30)
    out = capsys.readouterr().out
    assert "goal (SFT then RL: >= 80% wins, < 5% illegal, within 30 min, every seed): not measured" in out
    assert "goal (RL only: >= 80% wins, < 5% illegal, within 30 min, every seed): not met" in out
    learning.print_arms_table([row("SFT then RL", 0.9, 0.0)], 30)
    assert goal_line("SFT then RL").endswith(": met")
    learning.print_arms_table([row("SFT then RL", 0.9, 0.1)], 30)
    assert goal_line("SFT then RL").endswith(": not met")
    learning.print_arms_table([row("RL only", 0.85, 0.03), row("RL only", 0.8, 0.0)], 30)
    assert goal_line("RL only").endswith(": met")
