"""Memory and overhead of the demo's training loop: peak RSS, RSS growth per step, time not spent computing.

    python benchmarks/bench_memory.py              # the demo's defaults (3 groups x 8 games a step), 20 steps
    python benchmarks/bench_memory.py --quick      # tiny random model, 6 small steps (< 2 minutes)

It runs the real demo (`art.examples.tic_tac_toe.train.run_demo`: rollouts through the local server,
GRPO step, checkpoint, adapter load, canary) in this process, with held-out evaluation only at the end, and
reads this process's resident set size after every step (as `model.train` returns, so the last iteration's
reading does not include the final evaluation's games, which run after it). Printed: RSS after the base-model evaluation, the
peak RSS (the most any step needed), and the growth over the second half of the run (after warm-up: the KV
cache, the optimizer state and the allocator's pools reach their working size in the first steps), as
MiB per step from a least-squares line over the iterations that trained (in one where every group tied,
nothing trains and less memory stays afterwards, which would distort the line). The target: no growth (under 5 MiB per step, which over a
1,000-step run would still be under 5 GiB: report, then look closer if it ever gets near).

Overhead (issue 7, target < 5% of a step): each iteration is timed whole (rollouts + `model.train`), and
`model.train` is timed from the client; everything in it that is not the trainer's forward/backward
(tokenising, packing, advantages, optimizer, checkpoint save, adapter load, canary, logging trajectories
and metrics to disk) is overhead. Generation is the rest of the iteration.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import resource
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

GROWTH_LIMIT_MIB = 5.0


def rss_mib() -> float:
    """Current resident set size of this process in MiB."""
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def peak_rss_mib() -> float:
    """Peak resident set size of this process so far, in MiB (Linux reports KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def slope(xs: list[float], ys: list[float]) -> float:
    """Least-squares slope of ys over xs."""
    n = len(xs)
    mx, my = sum(xs) / n, sum(ys) / n
    var = sum((x - mx) ** 2 for x in xs)
    return sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / var if var else 0.0


def main(argv: list[str] | None = None) -> int:
    """Run the loop and print the table; returns 0 when RSS does not grow, else 1."""
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--quick", action="store_true", help="tiny random model, 6 small steps")
    parser.add_argument("--steps", type=int, default=None, help="training steps (default 20; quick 6)")
    args = parser.parse_args(argv)

    from art.examples.tic_tac_toe.train import DemoConfig, run_demo

    tmp = tempfile.TemporaryDirectory(prefix="art-bench-memory-")
    steps = args.steps or (6 if args.quick else 20)
    if args.quick:
        from art.testing.tiny_model import make_tiny_model

        model = str(make_tiny_model(Path(tmp.name) / "tiny"))
        config = DemoConfig.quick(
            base_model=model,
            base_path=str(Path(tmp.name) / ".art"),
            steps=steps,
            val_games=2,
            eval_every=10**6,
        )
    else:
        config = DemoConfig(
            base_path=str(Path(tmp.name) / ".art"), steps=steps, val_games=8, eval_every=10**6
        )

    import art

    train_calls: list[tuple[float, dict[str, float]]] = []  # (wall seconds of model.train, its metrics)
    original_train = art.TrainableModel.train

    after_train: list[float] = []  # RSS as each model.train returns

    async def timed_train(self: art.TrainableModel, *a: object, **k: object) -> art.TrainResult:
        t0 = time.perf_counter()
        result = await original_train(self, *a, **k)  # type: ignore[arg-type]
        train_calls.append((time.perf_counter() - t0, dict(result.metrics)))
        after_train.append(rss_mib())
        return result

    art.TrainableModel.train = timed_train  # type: ignore[method-assign]
    samples: list[tuple[int, float, float, float]] = []  # (loop iteration, rss, peak, seconds)
    trained: set[int] = set()  # iterations whose step trained (the checkpoint advanced)
    last_checkpoint: list[str] = []
    started = time.perf_counter()
    base_rss: list[float] = []
    base_done: list[float] = []  # seconds from the start when the base-model evaluation ended

    def record(line: str) -> None:
        fields = line.split()
        if line.startswith("base model:"):
            base_rss.append(rss_mib())
            base_done.append(time.perf_counter() - started)
        elif fields and fields[0].isdigit() and len(samples) < steps:
            # the loop's iteration, not the checkpoint step (a step whose groups all tie trains nothing)
            # RSS as this iteration's model.train returned: the last iteration also runs the final
            # held-out evaluation before its line is printed, a different workload (more and longer games)
            rss = after_train[len(samples)] if len(after_train) > len(samples) else rss_mib()
            samples.append((len(samples) + 1, rss, peak_rss_mib(), time.perf_counter() - started))
            if not last_checkpoint or fields[0] != last_checkpoint[-1]:
                trained.add(samples[-1][0])
            last_checkpoint.append(fields[0])
            print(
                f"iteration {samples[-1][0]:>3} (checkpoint {fields[0]}): RSS {samples[-1][1]:8.1f} MiB"
                f"  peak {samples[-1][2]:8.1f} MiB  {samples[-1][3]:7.1f}s",
                flush=True,
            )

    try:
        asyncio.run(run_demo(config, echo=record))
    finally:
        tmp.cleanup()

    # Iterations in which every group tied train nothing and hold less memory after them (no optimizer
    # step's leftovers): comparing them with trained ones would show growth or shrinkage that is neither.
    half = [s for s in samples[len(samples) // 2 :] if s[0] in trained] or samples[len(samples) // 2 :]
    growth = slope([float(s[0]) for s in half], [s[1] for s in half])
    print(
        f"\nbench_memory: model={'tiny (quick)' if args.quick else config.base_model} steps={steps} "
        f"groups/step={config.groups_per_step} x {config.group_size} games"
    )
    print("| measure | MiB |")
    print("|---|---|")
    if base_rss:
        print(f"| RSS after loading and the base-model evaluation | {base_rss[0]:.0f} |")
    print(f"| RSS after iteration {samples[0][0]} | {samples[0][1]:.0f} |")
    print(f"| RSS after iteration {samples[-1][0]} | {samples[-1][1]:.0f} |")
    print(f"| peak RSS of the run (the largest any step needed) | {max(s[2] for s in samples):.0f} |")
    print(
        f"| growth over the trained iterations among {half[0][0]}-{half[-1][0]} "
        f"({len(half)} of {len(samples) - len(samples) // 2}; least squares), per step | {growth:+.2f} |"
    )
    print(f"seconds per iteration: {samples[-1][3] / len(samples):.1f} (rollouts + training step)")
    # Every iteration but the last (which also runs the final held-out evaluation): rollouts + model.train.
    ends = [s[3] for s in samples[:-1]]
    kept = len(ends)
    trained = [(wall, m) for wall, m in train_calls[:kept] if "forward_backward_s" in m]
    if trained and base_done and kept:
        total_iter = ends[-1] - base_done[0]
        train_wall = sum(wall for wall, _ in train_calls[:kept])
        fwd_bwd = sum(m["forward_backward_s"] for _, m in trained)
        overhead = train_wall - fwd_bwd
        parts = (
            "tokenize_s",
            "collate_s",
            "optimizer_s",
            "release_cache_s",
            "release_memory_s",
            "save_s",
            "load_adapter_s",
            "canary_s",
            "pause_s",
        )
        print(f"\n| part of iterations 1-{kept} ({total_iter:.0f} s) | seconds | share |")
        print("|---|---|---|")
        print(
            f"| generation (rollouts) | {total_iter - train_wall:.1f} | {(total_iter - train_wall) / total_iter:.1%} |"
        )
        print(f"| forward + backward | {fwd_bwd:.1f} | {fwd_bwd / total_iter:.1%} |")
        for part in parts:
            value = sum(m.get(part, 0.0) for _, m in trained)
            print(f"| {part.removesuffix('_s')} | {value:.2f} | {value / total_iter:.2%} |")
        print(
            f"| overhead in all (model.train minus forward+backward, incl. logging) | {overhead:.2f} | {overhead / total_iter:.2%} |"
        )
        print(
            f"target: overhead < 5% of a step: {'met' if overhead / total_iter < 0.05 else 'NOT met'} ({overhead / total_iter:.2%})"
        )
    else:
        print("overhead: no step trained (every group tied), nothing to split")
    ok = growth < GROWTH_LIMIT_MIB
    print(
        f"target: no growth (< {GROWTH_LIMIT_MIB:g} MiB per step): {'met' if ok else 'NOT met'} ({growth:+.2f})"
    )
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
