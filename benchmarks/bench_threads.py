"""Where a service's torch work runs: one computing thread vs two, decode steps and a training step.

    python benchmarks/bench_threads.py            # default model, 2 rounds (4 processes, ~6 minutes)
    python benchmarks/bench_threads.py --quick    # tiny random model made on the spot (< 60 s)

torch's CPU parallelism is OpenMP (libgomp). Every thread that starts parallel work gets a pool of threads
of its own, and once a process holds more pool threads than CPUs, libgomp cuts every pool's spin-wait to
100 iterations: each parallel region then sleeps and wakes its threads through the kernel. Two layouts of
the same service work, each in fresh processes, alternated so the machine's drift hits both:

- one thread (ours): everything on the engine's worker thread (`TorchEngine.run`), as `ModelService` does;
- two threads (the layout before): generation on the worker, the training step on a trainer thread of
  its own, as `ModelService` did before.

Each process loads the model (`TorchEngine.from_pretrained`), serves a random LoRA adapter, generates
`--requests` x `--max-tokens` tokens straight through the engine (no HTTP), then takes one GRPO training step
(`Trainer.train_step`, 2 groups x 8 x 256 tokens, `bench_train_step.make_groups`; twice, the second one
timed, as the first compiles) on the layout's thread, then generates again. Reported per layout: the decode step (ms, after the training step: what the next
rollouts get), tokens/s, and the training step (s); the ratios are one thread over two, per round.
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_serving import QUESTIONS
from bench_train_step import cpu_summary, make_groups

LAYOUTS = {"one": "one thread (ours)", "two": "two threads (before)"}


def _args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--quick", action="store_true", help="tiny random model made on the spot")
    parser.add_argument("--model", default="smollm2-135m", help="short name, local folder or HF id")
    parser.add_argument("--rounds", type=int, default=2, help="processes per layout, alternated")
    parser.add_argument("--requests", type=int, default=32)
    parser.add_argument("--max-tokens", type=int, default=None, help="default 128 (16 with --quick)")
    parser.add_argument("--child", choices=sorted(LAYOUTS), help=argparse.SUPPRESS)
    return parser.parse_args(argv)


async def _generate(engine: Any, prompts: list[list[int]], max_tokens: int) -> tuple[float, float]:
    """(decode ms per step, tokens/s) of all prompts at once through `engine.generate`."""
    from art.engines.base import GenerateRequest, SamplingParams

    async def one(i: int) -> int:
        sampling = SamplingParams(max_tokens=max_tokens, seed=i, ignore_eos=True)
        request = GenerateRequest(model="bench@1", prompt_token_ids=prompts[i], sampling=sampling)
        return sum([len(out.token_ids) async for out in engine.generate(request)])

    decode, steps = engine.phase_seconds()["decode"], engine.decode_steps
    start = time.perf_counter()
    tokens = sum(await asyncio.gather(*(one(i) for i in range(len(prompts)))))
    seconds = time.perf_counter() - start
    per_step = (engine.phase_seconds()["decode"] - decode) / max(engine.decode_steps - steps, 1)
    return per_step * 1000, tokens / seconds


def child(args: argparse.Namespace, model_path: str) -> dict[str, float]:
    """One process of one layout: the measurements as a dict."""
    from art.engines.torch.random_adapter import save_random_adapter
    from art.engines.torch.torch_engine import TorchEngine
    from art.training.trainer import Trainer
    from art.types import RuntimeOptions, TrainSpec

    engine = TorchEngine.from_pretrained(
        model_path, served_name="bench", options=RuntimeOptions().with_env_overrides()
    )
    tmp = tempfile.TemporaryDirectory(prefix="art-bench-")
    adapter = save_random_adapter(str(engine.hf_model.config._name_or_path), Path(tmp.name) / "a", scale=0.1)
    engine.load_adapter("bench@1", adapter)
    template = engine.chat_template
    prompts = [
        template.render_ids(
            [{"role": "user", "content": QUESTIONS[i % len(QUESTIONS)]}], add_generation_prompt=True
        )
        for i in range(args.requests)
    ]
    groups = make_groups(
        engine.tokenizer,
        template,
        groups=2,
        size=8,
        tokens=64 if args.quick else 256,
        prompt_tokens=40,
        seed=0,
    )
    spec = TrainSpec(learning_rate=1e-5)

    async def run() -> dict[str, float]:
        trainer_thread: Any = None
        if args.child == "one":
            on_trainer = engine.run
        else:  # the layout before: a trainer thread of its own
            import concurrent.futures

            trainer_thread = concurrent.futures.ThreadPoolExecutor(max_workers=1)

            async def on_trainer(fn: Any) -> Any:
                return await asyncio.get_running_loop().run_in_executor(trainer_thread, fn)

        await engine.warm_up()
        trainer = await on_trainer(lambda: Trainer(engine.hf_model, template))
        before_ms, _ = await _generate(engine, prompts, args.max_tokens)
        await engine.pause()
        train_s = 0.0
        for step in range(2):  # the first one compiles the trainer's kernels: the second one counts
            start = time.perf_counter()
            await on_trainer(
                functools.partial(trainer.train_step, groups, spec, current_step=step, progress=False)
            )
            train_s = time.perf_counter() - start
        await engine.resume()
        after_ms, rate = await _generate(engine, prompts, args.max_tokens)
        if trainer_thread is not None:
            trainer_thread.shutdown()
        await engine.close()
        return {
            "decode_ms_before_training": before_ms,
            "decode_ms": after_ms,
            "tok_s": rate,
            "train_s": train_s,
        }

    try:
        return asyncio.run(run())
    finally:
        tmp.cleanup()


def main(argv: list[str] | None = None) -> int:
    """Alternate the layouts' processes and print the table."""
    args = _args(argv)
    args.max_tokens = args.max_tokens or (16 if args.quick else 128)
    with tempfile.TemporaryDirectory(prefix="art-bench-") as tmp:
        model_path = args.model
        if args.quick:
            from art.testing.tiny_model import make_tiny_model

            model_path = str(make_tiny_model(Path(tmp) / "tiny"))
        if args.child:
            print("RESULT " + json.dumps(child(args, model_path)), flush=True)
            return 0
        rounds: list[dict[str, dict[str, float]]] = []
        for index in range(args.rounds):
            row: dict[str, dict[str, float]] = {}
            for layout in ("one", "two") if index % 2 == 0 else ("two", "one"):
                command = [sys.executable, __file__, "--child", layout, "--model", model_path]
                command += ["--requests", str(args.requests), "--max-tokens", str(args.max_tokens)]
                command += ["--quick"] if args.quick else []
                done = subprocess.run(command, capture_output=True, text=True, check=False)
                lines = [ln for ln in done.stdout.splitlines() if ln.startswith("RESULT ")]
                if done.returncode != 0 or not lines:
                    print(done.stdout[-2000:], done.stderr[-4000:], file=sys.stderr)
                    raise SystemExit(f"the {layout!r} process failed (exit {done.returncode})")
                row[layout] = json.loads(lines[-1].removeprefix("RESULT "))
                print(f"  round {index}, {LAYOUTS[layout]}: {row[layout]}", file=sys.stderr, flush=True)
            rounds.append(row)
    name = "tiny (quick)" if args.quick else args.model
    print(
        f"\nbench_threads: model={name} requests={args.requests} x {args.max_tokens} new tokens with a LoRA "
        f"adapter, {args.rounds} round(s) of fresh processes"
    )
    print(f"cpu: {cpu_summary()}")
    print(f"| {'layout':<20} | decode ms/step | tokens/s | train step s |")
    print("|----------------------|----------------|----------|--------------|")
    for layout, label in LAYOUTS.items():
        runs = [r[layout] for r in rounds]
        med = {k: statistics.median(r[k] for r in runs) for k in runs[0]}
        print(f"| {label:<20} | {med['decode_ms']:>14.1f} | {med['tok_s']:>8.1f} | {med['train_s']:>12.2f} |")
    decode = statistics.median(r["two"]["decode_ms"] / r["one"]["decode_ms"] for r in rounds)
    rate = statistics.median(r["one"]["tok_s"] / r["two"]["tok_s"] for r in rounds)
    train = statistics.median(r["two"]["train_s"] / r["one"]["train_s"] for r in rounds)
    print(
        f"one thread vs two (median over rounds): decode step {decode:.2f}x faster, tokens/s {rate:.2f}x, "
        f"training step {train:.2f}x faster"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
