"""kill -9 at random moments of a training loop: every restart resumes from the newest committed
checkpoint, loses nothing of what was committed, and trains the next step.

A chain of child processes on one model (bounded: `ART_FAULT_KILLS` kills, default 4, each run well under
a minute on the tiny model). Each child resumes, trains one step (so the restart is proven), then gets
SIGKILL after a random delay of up to 2.5 times its first step (capped at 15 s): during rollouts, training, the save, the
canary or `model.log`. The delays come from `ART_FAULT_SEED` (default 22), printed with every failure so
it replays (where a delay lands also depends on the machine's speed). A last child trains one step and
exits cleanly; then the whole record is checked.
"""

from __future__ import annotations

import os
import random
import time
from pathlib import Path

import pytest
from fault_runs import children_cpu, describe, record_problems, start_child
from faults_loop import make_model

pytest.importorskip("torch")

KILLS = int(os.environ.get("ART_FAULT_KILLS", "4"))
SEED = int(os.environ.get("ART_FAULT_SEED", "22"))


def test_kill_9_at_random_moments_loses_nothing_and_every_restart_trains_on(
    tmp_path: Path, tiny_model_path: Path
) -> None:
    rng = random.Random(SEED)
    base_path, runs = tmp_path / "art", tmp_path / "runs"
    storage = make_model(base_path, tiny_model_path).storage
    rows, children = [], []
    previous: tuple[str, int] | None = None  # (where the kill landed, the newest committed step then)
    for run in range(KILLS + 1):
        child = start_child(runs, base_path, tiny_model_path, "--steps", "1" if run == KILLS else "1000")
        children.append(child)
        registered = child.wait_for("registered")
        first = child.wait_for("trained")
        context = f"seed {SEED}, run {run}: {child.seen}"
        if previous is not None:
            where, committed = previous
            lost = record_problems(storage, up_to=registered["step"])
            rows.append(
                f"| {run} | {where} | {'; '.join(lost) or 'nothing'} | step {registered['step']} "
                f"(newest committed: {committed}) | step {first['step']} |"
            )
            assert registered["step"] == committed, context
            assert first["step"] == committed + 1, context
            assert lost == [], context
        if run == KILLS:
            assert child.join() == 0, context
            break
        delay = rng.uniform(0, 2.5 * min(first["t"] - registered["t"], 6.0))
        time.sleep(delay)
        child.kill()
        where = f"{delay:.2f} s after the first step, {describe(child.events())}"
        previous = (where, storage.checkpoint_steps()[-1])
    print(f"\nseed {SEED}, {len(children)} children, {children_cpu(children):.1f} s of CPU")
    print("| run | killed | lost | restart resumed from | next step trained |")
    print("| --- | --- | --- | --- | --- |\n" + "\n".join(rows))
    assert record_problems(storage) == [], f"seed {SEED}"
    assert storage.rejected_checkpoints() == [], f"seed {SEED}"
