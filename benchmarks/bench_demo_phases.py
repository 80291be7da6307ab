"""Where `art demo`'s time and memory go: the demo's own code, with a timer around each phase.

    python benchmarks/bench_demo_phases.py                         # 2 steps, 16 held-out games
    python benchmarks/bench_demo_phases.py --steps 8 --val-games 64   # the whole demo (~1 h on AVX2)

Runs `art.examples.tic_tac_toe.train.run_demo` (what `art demo` runs) with its phases wrapped: start-up
(load the model, start engine and server, build kernels), each held-out evaluation, each step's rollouts
(`gather_trajectory_groups`) and each training step (`model.train`: pause, train, save, load, canary).
Each phase reports wall and CPU seconds (user+sys of this process: on a shared machine CPU time is what it
costs with the cores to itself), the 1-minute load average when it started, and the peak RSS so far.
The last lines extrapolate the default demo (8 steps of 3x8 games, 64 held-out games at the start, at step
4 and at step 8) from the measured per-step and per-game costs, so a short run predicts the whole one.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import resource
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_train_step import cpu_summary

PHASES: list[dict[str, Any]] = []


def _cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _peak_gib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20


def timed(
    name: str, fn: Callable[..., Any], count: Callable[..., int] = lambda *a, **k: 0
) -> Callable[..., Any]:
    """`fn` (async) with its wall/CPU time, load and peak RSS recorded under `name`."""

    async def wrapper(*args: Any, **kwargs: Any) -> Any:
        load, wall, cpu = os.getloadavg()[0], time.perf_counter(), _cpu()
        result = await fn(*args, **kwargs)
        PHASES.append(
            {
                "phase": name,
                "wall": time.perf_counter() - wall,
                "cpu": _cpu() - cpu,
                "load": load,
                "peak": _peak_gib(),
                "n": count(*args, **kwargs),
            }
        )
        return result

    return wrapper


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--steps", type=int, default=2)
    parser.add_argument("--val-games", type=int, default=16)
    parser.add_argument("--model", default="smollm2-135m")
    args = parser.parse_args(argv)

    from art.examples.tic_tac_toe import train as demo

    import art
    from art.local import LocalBackend

    demo.evaluate = timed("evaluate", demo.evaluate, lambda model, name, games, *a, **k: len(games))
    art.gather_trajectory_groups = timed("rollouts", art.gather_trajectory_groups)  # type: ignore[assignment]
    art.TrainableModel.train = timed("train", art.TrainableModel.train)  # type: ignore[method-assign]
    register = art.TrainableModel.register
    art.TrainableModel.register = timed("start-up", register)  # type: ignore[method-assign]

    print(f"{cpu_summary()}; load at start {os.getloadavg()[0]:.2f}", flush=True)
    with tempfile.TemporaryDirectory(prefix="demo-phases-") as tmp:
        config = demo.DemoConfig(
            base_model=args.model, steps=args.steps, val_games=args.val_games, base_path=tmp, eval_every=10**6
        )
        start_wall, start_cpu = time.perf_counter(), _cpu()
        result = asyncio.run(demo.run_demo(config, backend=LocalBackend(progress=False), echo=lambda s: None))
        total_wall, total_cpu = time.perf_counter() - start_wall, _cpu() - start_cpu
    print(f"\n{'phase':10} {'wall s':>8} {'cpu s':>8} {'load':>6} {'peak RSS GiB':>13}")
    for p in PHASES:
        label = p["phase"] + (f" ({p['n']} games)" if p["n"] else "")
        print(f"{label:24} {p['wall']:8.1f} {p['cpu']:8.1f} {p['load']:6.2f} {p['peak']:13.2f}")
    print(f"{'whole run':24} {total_wall:8.1f} {total_cpu:8.1f} {'':6} {_peak_gib():13.2f}")
    print(
        f"final step {result.final_step}; held-out win: base {result.base.win:.1%}, trained {result.trained.win:.1%}"
    )

    def per(phase: str, key: str) -> float:
        return statistics.median(p[key] for p in PHASES if p["phase"] == phase)

    evals = [p for p in PHASES if p["phase"] == "evaluate"]
    per_game = {k: statistics.median(p[k] / p["n"] for p in evals) for k in ("wall", "cpu")}
    d = demo.DemoConfig()
    n_evals = 3  # the base model, step 4 and step 8 (eval_every=4)
    for key in ("wall", "cpu"):
        start, roll, train = per("start-up", key), per("rollouts", key), per("train", key)
        whole = start + d.steps * (roll + train) + n_evals * d.val_games * per_game[key]
        print(
            f"default demo, extrapolated ({key}): {whole / 60:.1f} min = start-up {start:.0f} s + "
            f"{d.steps} x (rollouts {roll:.0f} s + train {train:.0f} s) + {n_evals} x {d.val_games} held-out "
            f"games x {per_game[key]:.2f} s  [rollouts {d.steps * roll / whole:.0%}, training "
            f"{d.steps * train / whole:.0%}, evaluation {n_evals * d.val_games * per_game[key] / whole:.0%}]"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
