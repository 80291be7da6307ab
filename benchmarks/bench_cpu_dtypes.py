"""What the libraries offer a CPU without native bf16 (AVX2 only), on SmolLM2-135M's matmul shapes.

    python benchmarks/bench_cpu_dtypes.py            # decode (M=32) and prefill/training (M=512) shapes
    python benchmarks/bench_cpu_dtypes.py --rounds 9

Each round times, for every projection shape of the model (q, k, v, o, gate, up, down, lm_head), the same
matmul as: float32 (what the engine picks on such a CPU); bf16 weights and activations (`torch.matmul`
in bf16: oneDNN where the CPU has AVX-512 BF16/AMX, else ATen's fallback); bf16 weights upcast to float32
at each call (half the weight memory, float32 arithmetic); and dynamic int8 (`torch.ao` dynamic
quantisation: int8 weights, activations quantised per call, fbgemm's AVX2 kernels; inference only, its
numbers differ from the trainer's, so the canary would need a looser tolerance). Variants alternate
within each round; the table gives each variant's median round time and its ratio to float32 (the median
over rounds of the per-round ratio), so the machine's drift (2 shared cores) cancels out.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_train_step import cpu_summary

# SmolLM2-135M: hidden 576, 9 heads of 64 (3 kv heads), intermediate 1536, vocab 49152.
SHAPES = {  # name: (in, out)
    "q": (576, 576),
    "k": (576, 192),
    "v": (576, 192),
    "o": (576, 576),
    "gate": (576, 1536),
    "up": (576, 1536),
    "down": (1536, 576),
    "lm_head": (576, 49152),
}


def variants(in_f: int, out_f: int, m: int) -> dict[str, Callable[[], torch.Tensor]]:
    """The ways to compute x @ W^T for one shape, each a closure over its own prepared inputs."""
    g = torch.Generator().manual_seed(0)
    w32 = torch.randn(out_f, in_f, generator=g) * 0.02
    x32 = torch.randn(m, in_f, generator=g)
    w16, x16 = w32.bfloat16(), x32.bfloat16()
    linear = torch.nn.Linear(in_f, out_f, bias=False)
    linear.weight.data.copy_(w32)
    q8 = torch.ao.quantization.quantize_dynamic(
        torch.nn.Sequential(linear), {torch.nn.Linear}, dtype=torch.qint8
    )
    return {
        "float32": lambda: torch.nn.functional.linear(x32, w32),
        "bf16": lambda: torch.nn.functional.linear(x16, w16),
        "bf16 weights, fp32 math": lambda: torch.nn.functional.linear(x32, w16.float()),
        "dynamic int8": lambda: q8(x32),
    }


def time_once(fn: Callable[[], torch.Tensor], reps: int) -> float:
    start = time.perf_counter()
    for _ in range(reps):
        fn()
    return (time.perf_counter() - start) / reps


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument(
        "--m", default="32,512", help="rows (tokens) per matmul: a decode batch, a prefill/training chunk"
    )
    parser.add_argument("--shapes", default=",".join(SHAPES), help="which projections (default: all)")
    args = parser.parse_args(argv)
    shapes = {name: SHAPES[name] for name in args.shapes.split(",")}
    print(f"{cpu_summary()}; torch {torch.__version__}, {torch.get_num_threads()} threads; "
          f"load {os.getloadavg()[0]:.2f}")  # fmt: skip
    for m in (int(v) for v in args.m.split(",")):
        per_shape = {name: variants(i, o, m) for name, (i, o) in shapes.items()}
        names = list(next(iter(per_shape.values())))
        reps = 10 if m <= 64 else 1
        for fns in per_shape.values():  # warm up (oneDNN/fbgemm build their kernels on first use)
            for fn in fns.values():
                fn()
        rounds: list[dict[str, float]] = []
        for r in range(args.rounds):
            order = names if r % 2 == 0 else names[::-1]
            rounds.append({n: sum(time_once(per_shape[s][n], reps) for s in shapes) for n in order})
        print(f"\nM = {m} ({', '.join(shapes)}; {args.rounds} rounds):")
        print(f"{'variant':26} {'ms (median)':>12} {'vs float32':>11}")
        for n in names:
            ms = statistics.median(x[n] for x in rounds) * 1000
            ratio = statistics.median(x["float32"] / x[n] for x in rounds)
            print(f"{n:26} {ms:12.2f} {ratio:10.2f}x", flush=True)
    print(f"load at the end {os.getloadavg()[0]:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
