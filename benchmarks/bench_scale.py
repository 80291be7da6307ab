"""Scaling on this machine: step time for 1 vs 2 trainer ranks, rollout throughput for 1 vs 2 inference
replicas, side by side in one run, and what that predicts for GPUs.

    python benchmarks/bench_scale.py                 # the default model (SmolLM2-135M), ~15 min on 2 cores
    python benchmarks/bench_scale.py --model PATH    # any causal LM
    python benchmarks/bench_scale.py --quick         # a tiny random model made on the spot (~2 min)
    python benchmarks/bench_scale.py --no-replicas   # ranks only (no Ray needed)

Ranks: the same groups (rolled out through the served endpoint, seeded) are trained by
`LocalBackend(train_ranks=1)`, `LocalBackend(train_ranks=2)` (DDP) and `LocalBackend(train_ranks=2,
train_sharding="fsdp2")` (gloo, each rank with cores/2 threads), all three open, their steps alternating; the
first step of each warms up, the median of the others is reported with its phases: forward+backward (the
slowest rank's; FSDP2's all-gathers and reduce-scatters happen inside it), the closing gradient all-reduce
(`sync_s`; nothing left to sync under FSDP2) and the whole step as the service times it (load of the served
checkpoint by every rank, the save, the canary: `backend.train`'s wall time). Memory per rank: the peak
resident set (Linux VmHWM, loading included), the largest sampled while training, and the parameter bytes
the rank holds after sharding. Then the bytes each rank receives per step, on paper, for DDP and FSDP2.

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
import contextlib
import math
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
    parser.add_argument(
        "--micro-batch-tokens",
        type=int,
        default=None,
        help="the steps' token budget per micro-batch (default 1024, quick 128: several per step, so both ranks "
        "train)",
    )
    parser.add_argument("--requests", type=int, default=None, help="concurrent requests per throughput round")
    parser.add_argument("--rounds", type=int, default=None, help="throughput rounds per replica count")
    parser.add_argument("--no-replicas", action="store_true", help="skip the Ray replicas part")
    args = parser.parse_args(argv)
    quick = args.quick
    args.steps = args.steps or (2 if quick else 3)
    args.micro_batch_tokens = args.micro_batch_tokens or (128 if quick else 1024)
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


# (label, trainer ranks, sharding) of the rank setups compared, in the order they take their steps
RANKS_1 = "1"
SETUPS: tuple[tuple[str, int, str], ...] = ((RANKS_1, 1, "ddp"), ("2 ddp", 2, "ddp"), ("2 fsdp2", 2, "fsdp2"))


def peak_rss_mib(pid: int) -> float:
    """The process's peak resident memory so far (Linux VmHWM: model load included), MiB; 0 if unknown."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


class RssSampler:
    """The largest resident memory each of `pids` reaches while it runs (sampled every 0.1 s), MiB."""

    def __init__(self, pids: list[int]) -> None:
        import threading

        self.pids, self.peak = pids, dict.fromkeys(pids, 0.0)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        import psutil

        while not self._stop.wait(0.1):
            for pid in self.pids:
                with contextlib.suppress(psutil.Error):
                    self.peak[pid] = max(self.peak[pid], psutil.Process(pid).memory_info().rss / 2**20)

    def __enter__(self) -> RssSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


async def measure_ranks(base: str, args: argparse.Namespace, root: Path) -> dict[str, dict[str, float]]:
    """{setup label: median step metrics and memory} for 1 rank, 2 DDP ranks and 2 FSDP2 ranks on the same
    groups, their steps alternating (1, 2 ddp, 2 fsdp2, 1, ...) so that a machine whose load changes during
    the run changes all alike."""
    import contextlib

    import art
    from art.local import LocalBackend

    async with contextlib.AsyncExitStack() as stack:
        models, backends, starts, pids, held = {}, {}, {}, {}, {}
        for label, ranks, sharding in SETUPS:
            models[label] = art.TrainableModel(
                name=f"r{ranks}{sharding}", project="scale", base_model=base, base_path=str(root)
            )
            backends[label] = await stack.enter_async_context(
                LocalBackend(progress=False, options=options(), train_ranks=ranks, train_sharding=sharding)
            )
            t = time.perf_counter()
            await models[label].register(backends[label])
            starts[label] = time.perf_counter() - t
            group = backends[label].service(models[label]).ranks
            infos = group.infos if group is not None else []
            pids[label] = [info.pid for info in infos]
            held[label] = max((info.extra.get("param_bytes", 0) / 2**20 for info in infos), default=0.0)
        rows: dict[str, list[dict[str, float]]] = {label: [] for label, _, _ in SETUPS}
        in_steps: dict[str, dict[int, float]] = {label: {} for label, _, _ in SETUPS}
        for step in range(args.steps):
            groups = await play(models[RANKS_1], args, step)  # the same groups for all
            for label, _, _ in SETUPS:
                t = time.perf_counter()
                with RssSampler(pids[label]) as sampler:
                    result = await backends[label].train(
                        models[label], groups, learning_rate=1e-5, micro_batch_tokens=args.micro_batch_tokens
                    )
                rows[label].append({**result.metrics, "step_s": time.perf_counter() - t})
                for pid, mib in sampler.peak.items():
                    in_steps[label][pid] = max(in_steps[label].get(pid, 0.0), mib)
                print(f"  step {step + 1}, {label} rank(s): {time.perf_counter() - t:.1f} s", file=sys.stderr)
        out: dict[str, dict[str, float]] = {}
        for label, _, _ in SETUPS:
            counted = rows[label][1:] or rows[label]  # the first step warms up
            out[label] = {
                key: statistics.median(float(r.get(key, 0.0)) for r in counted)
                for key in ("step_s", "forward_backward_s", "sync_s", "num_tokens", "num_micro_batches")
            }
            out[label]["start_s"] = starts[label]
            # per rank (the largest of the ranks); the single rank is the service's process (engine too): no figure
            out[label]["peak_rss_mib"] = max((peak_rss_mib(pid) for pid in pids[label]), default=0.0)
            out[label]["step_rss_mib"] = max(in_steps[label].values(), default=0.0)
            out[label]["params_mib"] = held[label]
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


def weight_bytes(base: str) -> tuple[int, int]:
    """(all the base's weights, the decoder layers' share) in bytes at float32 (the benchmark's dtype), counted
    on the meta device (nothing loaded): what FSDP2 all-gathers for a forward, and again for a backward."""
    import torch
    import transformers

    config = transformers.AutoConfig.from_pretrained(base)
    with torch.device("meta"):
        model = transformers.AutoModelForCausalLM.from_config(config)  # type: ignore[no-untyped-call]
    total = sum(p.numel() * 4 for p in model.parameters())  # tied weights once
    layers = sum(p.numel() * 4 for p in model.get_decoder().layers.parameters())
    return total, layers


def wire_mib(ranks: dict[str, dict[str, float]], grad_bytes: int, weights: tuple[int, int], n: int = 2) -> dict[str, float]:  # fmt: skip
    """MiB each rank receives per step (on paper) for DDP and FSDP2 with `n` ranks, and its parts."""
    total, layers = weights
    share = (n - 1) / n  # a ring all-gather / reduce-scatter: each rank receives (n-1)/n of the whole
    passes = math.ceil(ranks["2 fsdp2"]["num_micro_batches"] / n)  # forward+backward passes per rank
    gather = share * (total + layers)  # forward: every weight; backward: the layers again (the root stays)
    scatter = share * grad_bytes  # LoRA gradients, reduce-scattered after every backward
    return {
        "ddp": 2 * share * grad_bytes / 2**20,  # ring all-reduce = reduce-scatter + all-gather
        "fsdp2": passes * (gather + scatter) / 2**20,
        "passes": float(passes),
        "gather_per_pass": gather / 2**20,
        "scatter_per_pass": scatter / 2**20,
    }


def report(args: argparse.Namespace, name: str, ranks: dict[str, dict[str, float]], replicas: dict[int, dict[str, float]], grad_bytes: int, weights: tuple[int, int]) -> None:  # fmt: skip
    print(f"\n## bench_scale: {name}, {os.cpu_count()} CPU cores, torch {__import__('torch').__version__}\n")
    print(
        f"ranks: {args.steps} steps each (first warms up), {args.groups} groups x {args.size} x {args.tokens} tokens, "
        f"micro-batches of {args.micro_batch_tokens} tokens ({ranks['2 ddp']['num_micro_batches']:.0f} per step)"
    )
    print("memory per rank (the larger of the two; 1 rank is the service's own process, engine included: -):")
    print(
        "peak RSS = the rank process's high-water mark (loading the base included), in steps = sampled while"
    )
    print("training, weights held = the model's parameters on the rank after sharding\n")
    print(
        "| trainer ranks | step s (median) | forward+backward s | sync s | ranks start s "
        "| peak RSS MiB | RSS in steps MiB | weights held MiB |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for label, m in ranks.items():
        memory = " | ".join(
            f"{m[k]:.4g}" if m[k] else "-" for k in ("peak_rss_mib", "step_rss_mib", "params_mib")
        )
        print(
            f"| {label} | {m['step_s']:.2f} | {m['forward_backward_s']:.2f} | {m['sync_s']:.3f} "
            f"| {m['start_s']:.1f} | {memory} |"
        )
    one, ddp, fsdp = ranks[RANKS_1], ranks["2 ddp"], ranks["2 fsdp2"]
    print(f"2 ranks vs 1: step time x{ddp['step_s'] / one['step_s']:.2f}, forward+backward x"
          f"{ddp['forward_backward_s'] / max(one['forward_backward_s'], 1e-9):.2f} (below 1: faster)")  # fmt: skip
    print(
        f"fsdp2 vs ddp (2 ranks): step time x{fsdp['step_s'] / ddp['step_s']:.2f}, forward+backward x"
        f"{fsdp['forward_backward_s'] / max(ddp['forward_backward_s'], 1e-9):.2f}, peak RSS x"
        f"{fsdp['peak_rss_mib'] / max(ddp['peak_rss_mib'], 1e-9):.2f}, RSS in steps x"
        f"{fsdp['step_rss_mib'] / max(ddp['step_rss_mib'], 1e-9):.2f}, weights held x"
        f"{fsdp['params_mib'] / max(ddp['params_mib'], 1e-9):.2f}"
    )
    wire = wire_mib(ranks, grad_bytes, weights)
    mib, base_mib, layers_mib = grad_bytes / 2**20, weights[0] / 2**20, weights[1] / 2**20
    print("\n### bytes each rank receives per step (on paper, 2 ranks, float32)")
    print("| sharding | what moves | MiB per rank per step |")
    print("|---|---|---|")
    print(
        f"| ddp | the LoRA gradients ({mib:.2f} MiB), ring all-reduced once: 2(N-1)/N x that | {wire['ddp']:.2f} |"
    )
    print(
        f"| fsdp2 | per forward+backward pass ({wire['passes']:.0f} per rank this step): the base ({base_mib:.1f} MiB) "
        f"all-gathered for the forward and its layers ({layers_mib:.1f} MiB) again for the backward, (N-1)/N x "
        f"each = {wire['gather_per_pass']:.1f} MiB, plus the LoRA gradients reduce-scattered "
        f"({wire['scatter_per_pass']:.2f} MiB); a KL penalty adds a forward's gather | {wire['fsdp2']:.1f} |"
    )
    print(f"fsdp2 moves x{wire['fsdp2'] / max(wire['ddp'], 1e-9):.0f} the bytes ddp moves per step")
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
    fb = one["forward_backward_s"]
    print("\n### what this predicts on GPUs (on paper: each rank or replica with a device of its own)")
    print("| part | with N ranks / K replicas | sync cost |")
    print("|---|---|---|")
    print(f"| forward+backward ({fb:.2f} s here for 1 rank) | / N (micro-batches split over ranks) | none |")
    print(f"| gradient all-reduce (ddp) | once per step | {mib:.2f} MiB of LoRA gradients: ring all-reduce moves "
          f"2(N-1)/N x that: ~{2 * mib / 1024 / 100 * 1e3:.2f} ms on NVLink (100 GB/s), "
          f"~{2 * mib / 1024 / 10 * 1e3:.1f} ms on PCIe (10 GB/s) |")  # fmt: skip
    gather = wire["gather_per_pass"]
    print(f"| weight all-gathers (fsdp2) | every forward and backward of every micro-batch | {gather:.1f} MiB per "
          f"pass here (float32; half in bf16): ~{gather / 1024 / 100 * 1e3:.1f} ms on NVLink, "
          f"~{gather / 1024 / 10 * 1e3:.0f} ms on PCIe, per pass; overlapped with compute by FSDP2's prefetch "
          f"where the layers take longer |")  # fmt: skip
    print(
        "| checkpoint load (every rank), save (rank 0), canary | not divided | disk: every rank reads the served step |"
    )
    print(
        "| optimizer step (AdamW on the adapter) | ddp: not divided (each rank the same); fsdp2: / N | none |"
    )
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

    async def both() -> tuple[dict[str, dict[str, float]], dict[int, dict[str, float]]]:
        # one event loop for both parts: the models' OpenAI clients are bound to the loop that made them
        ranks = await measure_ranks(base, args, root / "ranks")
        replicas = {} if args.no_replicas else await measure_replicas(base, args, root / "replicas")
        return ranks, replicas

    ranks, replicas = asyncio.run(both())
    report(args, name, ranks, replicas, adapter_bytes(root / "ranks"), weight_bytes(base))
    tmp.cleanup()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
