"""Learning benchmark: the tic-tac-toe demo with several seeds, base vs trained on held-out games.

    python benchmarks/learning.py                       # 3 seeds, the demo's defaults (about 15 min each)
    python benchmarks/learning.py --steps 6 --seeds 0   # shorter
    python benchmarks/learning.py --quick --model PATH  # smoke run on any (tiny) model

For each seed it runs the very code of `art demo` (`art.examples.tic_tac_toe.train.run_demo`), each in its
own model folder, and prints one table: the held-out win rate (and reward) of the base model and at each
evaluation step, the wall time, and the mean and spread across seeds. The target (issue 5) is a win rate
at least twice the base rate, or 30 points above it, within 30 minutes, for every seed. The plot of win
rate per step for all seeds is saved next to the table.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

from art.examples.tic_tac_toe.train import DemoConfig, DemoResult, run_demo


def spread(values: list[float]) -> str:
    """Mean ± population standard deviation, as percentages."""
    if not values:
        return "-"
    sd = statistics.pstdev(values) if len(values) > 1 else 0.0
    return f"{statistics.mean(values):.1%} ± {sd:.1%}"


def target_met(base: float, trained: float) -> bool:
    """Issue 5's target: at least twice the base win rate, or 30 points above it."""
    return (trained >= 2 * base and trained > base) or trained >= base + 0.30


def print_table(results: dict[int, DemoResult]) -> None:
    steps = sorted({step for r in results.values() for step, _ in r.evals})
    head = f"{'seed':>4} {'base win':>9} " + " ".join(f"{'@' + str(s):>7}" for s in steps)
    head += f" {'final':>7} {'minutes':>8} {'target':>7}"
    print(head)
    print("-" * len(head))
    for seed, r in sorted(results.items()):
        by_step = {step: e.win for step, e in r.evals}
        cells = " ".join(f"{by_step[s]:>7.1%}" if s in by_step else f"{'':>7}" for s in steps)
        ok = target_met(r.base.win, r.trained.win) and r.seconds <= 30 * 60
        print(
            f"{seed:>4} {r.base.win:>9.1%} {cells} {r.trained.win:>7.1%} {r.seconds / 60:>8.1f} {'yes' if ok else 'no':>7}"
        )
    bases = [r.base.win for r in results.values()]
    finals = [r.trained.win for r in results.values()]
    print(f"base win rate:    {spread(bases)}")
    print(f"trained win rate: {spread(finals)}")
    rewards = [(r.base.reward, r.trained.reward) for r in results.values()]
    print("held-out reward:  " + ", ".join(f"{b:.3f} -> {t:.3f}" for b, t in rewards))
    print(
        "illegal moves:    "
        + ", ".join(f"{r.base.illegal:.0%} -> {r.trained.illegal:.0%}" for r in results.values())
    )


def save_plot(results: dict[int, DemoResult], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4), dpi=120)
    for seed, r in sorted(results.items()):
        xs = [s for s, _ in r.evals]
        ax.plot(xs, [e.win for _, e in r.evals], marker="o", label=f"seed {seed} win rate")
        ax.plot(xs, [e.reward for _, e in r.evals], linestyle="--", alpha=0.6, label=f"seed {seed} reward")
    ax.set_xlabel("step")
    ax.set_ylabel("held-out")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)
    ax.set_title("tic-tac-toe vs a random opponent (held-out games)")
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--steps", type=int, default=None)
    parser.add_argument("--model", default="smollm2-135m")
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--base-path", default="benchmarks/results/learning")
    parser.add_argument("--learning-rate", type=float, default=None)
    parser.add_argument("--val-games", type=int, default=None)
    args = parser.parse_args()

    results: dict[int, DemoResult] = {}
    started = time.perf_counter()
    for seed in args.seeds:
        overrides: dict[str, object] = {
            "base_model": args.model,
            "name": f"seed-{seed}",
            "seed": seed,
            "base_path": args.base_path,
        }
        for key in ("steps", "learning_rate", "val_games"):
            if getattr(args, key) is not None:
                overrides[key] = getattr(args, key)
        config = DemoConfig.quick(**overrides) if args.quick else DemoConfig(**overrides)  # type: ignore[arg-type]
        print(f"=== seed {seed} ===", flush=True)
        results[seed] = asyncio.run(run_demo(config))
    print()
    print(
        f"Learning benchmark: {args.model}, {len(args.seeds)} seed(s), {time.perf_counter() - started:.0f} s in all"
    )
    print_table(results)
    plot = Path(args.base_path) / "learning.png"
    save_plot(results, plot)
    print(f"plot: {plot}")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
