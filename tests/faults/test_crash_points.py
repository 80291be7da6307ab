"""Crashes at named points of a training step: the restart loses nothing, resumes from the right
checkpoint, and trains the next step.

One chain of child processes on one model: each child resumes from what the previous one left (the
restart of the previous fault), trains one step (the next step trains), then dies at the next named point
during its second step, exiting at once (`os._exit`: no cleanup, as a kill). A last child trains one
more step and exits cleanly; then every committed step must have its checkpoint intact and its groups
and history line in the record.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from fault_runs import children_cpu, describe, record_problems, start_child
from faults_loop import CRASH_EXIT, make_model

pytest.importorskip("torch")

# point -> is the step it hits committed (so the restart resumes from it)?
POINTS = {
    "after-optimizer-step": False,  # trained in memory only
    "before-manifest": False,  # checkpoint files written, no manifest: an incomplete save
    "before-rename": False,  # manifest written, folder still temporary
    "after-commit": True,  # committed, never loaded or canaried
    "after-commit-before-log": True,  # published, model.log never ran
    "mid-trajectory-write": True,  # model.log tore the trajectory file
    "mid-history-write": True,  # model.log wrote the trajectories, tore the history line
}


def test_a_crash_at_each_named_point_loses_nothing_and_the_next_step_trains(
    tmp_path: Path, tiny_model_path: Path
) -> None:
    base_path, runs = tmp_path / "art", tmp_path / "runs"
    storage = make_model(base_path, tiny_model_path).storage
    rows, children = [], []
    previous: tuple[str, int] | None = None  # (point, the step its restart must resume from)
    for point in [*POINTS, None]:
        args = ["--steps", "1"] if point is None else ["--steps", "2", "--crash-at", point, "--crash-on", "2"]
        child = start_child(runs, base_path, tiny_model_path, *args)
        children.append(child)
        registered = child.wait_for("registered")
        first = child.wait_for("trained")
        if previous is not None:
            crashed_at, expected = previous
            lost = record_problems(storage, up_to=registered["step"])
            rows.append(
                f"| {crashed_at} | {'; '.join(lost) or 'nothing'} | step {registered['step']} "
                f"(expected {expected}) | step {first['step']} |"
            )
            assert registered["step"] == expected, (crashed_at, child.seen)
            assert first["step"] == expected + 1, (crashed_at, child.seen)
            assert lost == [], (crashed_at, lost)
        code = child.join()
        if point is None:
            assert code == 0, child.seen
            break
        assert code == CRASH_EXIT and child.seen[-1] == {
            **child.seen[-1],
            "event": "crash",
            "point": point,
        }, f"{point}: exit {code}, {describe(child.seen)}"
        in_flight = first["step"] + 1
        committed = storage.checkpoint_steps()
        assert (in_flight in committed) is POINTS[point], (point, committed)
        previous = (point, committed[-1])
    print(f"\n{len(children)} children, {children_cpu(children):.1f} s of CPU")
    print("| crash point | lost | restart resumed from | next step trained |\n| --- | --- | --- | --- |")
    print("\n".join(rows))
    assert record_problems(storage) == []
    assert storage.rejected_checkpoints() == []  # a crash is not a reason to set a good checkpoint aside
