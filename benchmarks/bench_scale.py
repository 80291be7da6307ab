"""Scaling on this machine: step time for 1 vs 2 trainer ranks, rollout throughput for 1 vs 2 inference
replicas, side by side in one run, and what that predicts for GPUs.

    python benchmarks/bench_scale.py                 # the default model (SmolLM2-135M), ~15 min on 2 cores
    python benchmarks/bench_scale.py --model PATH    # any causal LM
    python benchmarks/bench_scale.py --quick         # a tiny random model made on the spot (~2 min)
    python benchmarks/bench_scale.py --no-replicas   # ranks only (no Ray needed)

Ranks: the same groups (rolled out through the served endpoint, seeded) are trained by
`LocalBackend(train_ranks=1)` and `LocalBackend(train_ranks=2)` (gloo, each rank with cores/2 threads), both
open, their steps alternating; the first step of each warms up, the median of the others is reported with
its phases: forward+backward (the slowest rank's), the gradient all-reduce (`sync_s`) and the whole step as the service times it (load of
the served checkpoint by every rank, the save, the canary: `backend.train`'s wall time).

Replicas: a two-node Ray cluster on 127.0.0.1 (`art.testing.local_ray_cluster`, 2 CPUs a node), `RayBackend` with
1 and then 2 torch-engine replicas; `--requests` concurrent requests of `--tokens` tokens each (ignore_eos)
through the one endpoint, timed end to end (median of `--rounds`).

The cores are what limit both here: two ranks or two replicas on the same 2 cores split them, so a ratio
near 1 (or below) is what this machine can show; the table at the end says which parts divide by the
ranks or replicas on GPUs, each with its own device, and where the synchronisation costs go.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("WANDB_MODE", "disabled")

PROMPT = [{"role": "user", "content": "Count from one to twenty, in words."}]


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--model", default="smollm2-135m", help="base model (default: SmolLM2-135M)")
    parser.add_argument("--quick", action="store_true", help="tiny random model made on the spot")
    parser.add_argument("--steps", type=int, default=None, help="steps per rank count (first warms up)")
    parser.add_argument("--groups", type=int, default=None, help="groups per step")
    parser.add_argument("--size", type=int, default=None, help="rollouts per group")
    parser.add_argument("--tokens", type=int, default=None, help="tokens per rollout")
    parser.add_argument("--requests", type=int, default=None, help="concurrent requests per throughput round")
    parser.add_argument("--rounds", type=int, default=None, help="throughput rounds per replica count")
    parser.add_argument("--no-replicas", action="store_true", help="skip the Ray replicas part")
    args = parser.parse_args(argv)
    quick = args.quick
    args.steps = args.steps or (2 if quick else 3)
    args.groups = args.groups or (2 if quick else 4)
    args.size = args.size or (4 if quick else 8)
    args.tokens = args.tokens or (16 if quick else 64)
    args.requests = args.requests or (8 if quick else 16)
    args.rounds = args.rounds or (1 if quick else 2)
    return args


def options() -> Any:
    from art.types import RuntimeOptions

    return RuntimeOptions(dtype="float32", train_compile=False)


async def rollout(model: Any, seed: int, reward: float, tokens: int) -> Any:
    import art

    response = await model.openai_client().chat.completions.create(
        model=model.get_inference_name(),
        messages=PROMPT,
        max_tokens=tokens,
        temperature=1.0,
        seed=seed,
        extra_body={"ignore_eos": True},
    )
    return art.Trajectory(messages_and_choices=[*PROMPT, response.choices[0]], reward=reward)


async def play(model: Any, args: argparse.Namespace, step: int) -> list[Any]:
    import art

    return await art.gather_trajectory_groups(
        [
            art.TrajectoryGroup(
                rollout(model, step * 1000 + g * 100 + i, float(i % 2), args.tokens) for i in range(args.size)
            )
            for g in range(args.groups)
        ],
        pbar_desc=None,
    )


async def measure_ranks(base: str, args: argparse.Namespace, root: Path) -> dict[int, dict[str, float]]:
    """{ranks: median step metrics} for 1 and 2 ranks on the same groups, their steps alternating (1, 2, 1,
    2, ...) so that a machine whose load changes during the run changes both alike."""
    import contextlib

    import art
    from art.local import LocalBackend

    async with contextlib.AsyncExitStack() as stack:
        models, backends, starts = {}, {}, {}
        for ranks in (1, 2):
            models[ranks] = art.TrainableModel(
                name=f"r{ranks}", project="scale", base_model=base, base_path=str(root)
            )
            backends[ranks] = await stack.enter_async_context(
                LocalBackend(progress=False, options=options(), train_ranks=ranks)
            )
            t = time.perf_counter()
            await models[ranks].register(backends[ranks])
            starts[ranks] = time.perf_counter() - t
        rows: dict[int, list[dict[str, float]]] = {1: [], 2: []}
        for step in range(args.steps):
            groups = await play(models[1], args, step)  # the same groups for both
            for ranks in (1, 2):
                t = time.perf_counter()
                result = await backends[ranks].train(models[ranks], groups, learning_rate=1e-5)
                rows[ranks].append({**result.metrics, "step_s": time.perf_counter() - t})
                print(f"  step {step + 1}, {ranks} rank(s): {time.perf_counter() - t:.1f} s", file=sys.stderr)
    out: dict[int, dict[str, float]] = {}
    for ranks in (1, 2):
        counted = rows[ranks][1:] or rows[ranks]  # the first step warms up
        out[ranks] = {
            key: statistics.median(float(r.get(key, 0.0)) for r in counted)
            for key in ("step_s", "forward_backward_s", "sync_s", "num_tokens")
        }
        out[ranks]["start_s"] = starts[ranks]
    return out


async def measure_replicas(base: str, args: argparse.Namespace, root: Path) -> dict[int, dict[str, float]]:
    """{replicas: throughput} for 1 and 2 Ray replicas behind one endpoint."""
    import art
    from art.ray import RayBackend
    from art.testing.local_ray_cluster import LocalCluster

    out: dict[int, dict[str, float]] = {}
    with LocalCluster(nodes=2, cpus_per_node=2) as cluster:
        for replicas in (1, 2):
            model = art.TrainableModel(
                name=f"i{replicas}", project="scale", base_model=base, base_path=str(root)
            )
            backend = RayBackend(
                cluster.address,
                inference_replicas=replicas,
                path=str(root),
                progress=False,
                options=options(),
            )
            async with backend:
                await model.register(backend)
                await rollout(model, 0, 0.0, 4)  # warm up
                times = []
                for r in range(args.rounds):
                    t = time.perf_counter()
                    await asyncio.gather(
                        *(rollout(model, r * 100 + i, 0.0, args.tokens) for i in range(args.requests))
                    )
                    times.append(time.perf_counter() - t)
                seconds = statistics.median(times)
                out[replicas] = {"seconds": seconds, "tok_s": args.requests * args.tokens / seconds}
            print(f"  {replicas} replica(s): {out[replicas]}", file=sys.stderr, flush=True)
        import ray

        ray.shutdown()
    return out


def adapter_bytes(root: Path) -> int:
    """Size of one trained adapter's weights (what the all-reduce moves each step, in float32)."""
    found = sorted(root.rglob("adapter_model.safetensors"))
    return found[-1].stat().st_size if found else 0


def report(args: argparse.Namespace, name: str, ranks: dict[int, dict[str, float]], replicas: dict[int, dict[str, float]], grad_bytes: int) -> None:  # fmt: skip
    print(f"\n## bench_scale: {name}, {os.cpu_count()} CPU cores, torch {__import__('torch').__version__}\n")
    print(
        f"ranks: {args.steps} steps each (first warms up), {args.groups} groups x {args.size} x {args.tokens} tokens"
    )
    print("| trainer ranks | step s (median) | forward+backward s | all-reduce s | ranks start s |")
    print("|---|---|---|---|---|")
    for n, m in ranks.items():
        print(
            f"| {n} | {m['step_s']:.2f} | {m['forward_backward_s']:.2f} | {m['sync_s']:.3f} | {m['start_s']:.1f} |"
        )
    one, two = ranks[1], ranks[2]
    print(f"2 ranks vs 1: step time x{two['step_s'] / one['step_s']:.2f}, forward+backward x"
          f"{two['forward_backward_s'] / max(one['forward_backward_s'], 1e-9):.2f} (below 1: faster)")  # fmt: skip
    if replicas:
        print(
            f"\nreplicas: {args.requests} concurrent requests x {args.tokens} tokens, median of {args.rounds}"
        )
        print("| inference replicas | seconds | tokens/s |")
        print("|---|---|---|")
        for n, m in replicas.items():
            print(f"| {n} | {m['seconds']:.2f} | {m['tok_s']:.1f} |")
        print(
            f"2 replicas vs 1: throughput x{replicas[2]['tok_s'] / replicas[1]['tok_s']:.2f} (above 1: faster)"
        )
    mib = grad_bytes / 2**20
    fb = one["forward_backward_s"]
    print("\n### what this predicts on GPUs (on paper: each rank or replica with a device of its own)")
    print("| part | with N ranks / K replicas | sync cost |")
    print("|---|---|---|")
    print(f"| forward+backward ({fb:.2f} s here for 1 rank) | / N (micro-batches split over ranks) | none |")
    print(f"| gradient all-reduce | once per step | {mib:.2f} MiB of LoRA gradients: ring all-reduce moves "
          f"2(N-1)/N x that: ~{2 * mib / 1024 / 100 * 1e3:.2f} ms on NVLink (100 GB/s), "
          f"~{2 * mib / 1024 / 10 * 1e3:.1f} ms on PCIe (10 GB/s) |")  # fmt: skip
    print(
        "| checkpoint load (every rank), save (rank 0), canary | not divided | disk: every rank reads the served step |"
    )
    print("| optimizer step (AdamW on the adapter) | not divided (each rank the same) | none |")
    print(
        "| rollout decode | x K replicas for K <= the requests in flight | none (one adapter load per replica per step) |"
    )


def main(argv: list[str]) -> int:
    args = parse_args(argv)
    tmp = tempfile.TemporaryDirectory(prefix="bench-scale-")
    root = Path(tmp.name)
    if args.quick:
        from art.testing.tiny_model import make_tiny_model

        base, name = str(make_tiny_model(root / "tiny")), "tiny random model (quick)"
    else:
        from art.base_model.default_model import resolve_base_model

        base, name = resolve_base_model(args.model), args.model

    async def both() -> tuple[dict[int, dict[str, float]], dict[int, dict[str, float]]]:
        # one event loop for both parts: the models' OpenAI clients are bound to the loop that made them
        ranks = await measure_ranks(base, args, root / "ranks")
        replicas = {} if args.no_replicas else await measure_replicas(base, args, root / "replicas")
        return ranks, replicas

    ranks, replicas = asyncio.run(both())
    report(args, name, ranks, replicas, adapter_bytes(root / "ranks"))
    tmp.cleanup()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
