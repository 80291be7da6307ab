"""Serving throughput: the same chat prompts one request at a time vs 32 concurrent, through the server.

    python benchmarks/bench_serving.py --quick          # tiny random model, < 60 s (run by the tests)
    python benchmarks/bench_serving.py                  # the default model (smollm2-135m), a few minutes
    python benchmarks/bench_serving.py --model PATH     # any local folder or HF id
    python benchmarks/bench_serving.py --adapter        # requests name a random LoRA adapter instead

Both phases go through the real OpenAI-compatible server with the official async client, on the same
prompts and seeds, so they sample the same tokens (up to bf16 rounding under different batch shapes).
The table gives completion tokens per second of each phase and the ratio; the target is >= 3x.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

QUESTIONS = [
    "What is the capital of France?",
    "Name three primary colours.",
    "How many legs does a spider have?",
    "What is 12 times 12?",
    "Give me a synonym for happy.",
    "Why is the sky blue?",
    "What does a thermometer measure?",
    "Name a planet with rings.",
    "What is the boiling point of water?",
    "Who wrote Romeo and Juliet?",
    "What is photosynthesis?",
    "Translate 'thank you' into French.",
    "What is the largest ocean?",
    "How many days are in a leap year?",
    "What gas do plants absorb?",
    "Name a mammal that can fly.",
    "What is the square root of 81?",
    "What colour is a ripe banana?",
    "What is the freezing point of water in Fahrenheit?",
    "Name the longest river in Africa.",
    "What do bees make?",
    "How many continents are there?",
    "What is the opposite of cold?",
    "What is H2O?",
    "Name a famous painter.",
    "What is the speed of light, roughly?",
    "How many minutes are in an hour?",
    "What is the main language of Brazil?",
    "What is a haiku?",
    "Name a citrus fruit.",
    "What instrument has 88 keys?",
    "What is the chemical symbol for gold?",
]


def _args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--quick", action="store_true", help="tiny random model made on the spot")
    parser.add_argument("--model", default="smollm2-135m", help="short name, local folder or HF id")
    parser.add_argument("--requests", type=int, default=32, help="prompts (= concurrency of phase b)")
    parser.add_argument(
        "--max-tokens", type=int, default=None, help="new tokens per request (default 128; quick 48)"
    )
    parser.add_argument("--dtype", default=None, help="bf16 / float32 (default: bf16 where the CPU has it)")
    parser.add_argument("--adapter", action="store_true", help="serve and select a random LoRA adapter")
    parser.add_argument("--threads", type=int, default=None, help="torch threads of the engine")
    return parser.parse_args(argv)


async def _phase(
    client: Any, model: str, prompts: list[list[dict[str, str]]], max_tokens: int, concurrent: bool
) -> tuple[int, float]:
    """(completion tokens, wall seconds) for serving all prompts one at a time or all at once."""

    async def one(i: int) -> int:
        reply = await client.chat.completions.create(
            model=model, messages=prompts[i], max_tokens=max_tokens, seed=i, temperature=1.0
        )
        return int(reply.usage.completion_tokens)

    start = time.perf_counter()
    if concurrent:
        counts = await asyncio.gather(*(one(i) for i in range(len(prompts))))
    else:
        counts = [await one(i) for i in range(len(prompts))]
    return sum(counts), time.perf_counter() - start


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark and print the table; returns 0 when the target ratio is met, else 1."""
    args = _args(argv)
    import openai
    import torch

    from art.engines.torch.torch_engine import TorchEngine
    from art.openai_server.http import ServerThread, create_app
    from art.types import RuntimeOptions

    tmp = tempfile.TemporaryDirectory(prefix="art-bench-")
    model_path = args.model
    if args.quick:
        from art.testing.tiny_model import make_tiny_model

        model_path = str(make_tiny_model(Path(tmp.name) / "tiny"))
    max_tokens = args.max_tokens or (48 if args.quick else 128)

    t0 = time.perf_counter()
    engine = TorchEngine.from_pretrained(
        model_path,
        served_name="bench",
        dtype=args.dtype,
        num_threads=args.threads,
        options=RuntimeOptions().with_env_overrides(),  # ART_ENGINE_* switches, for A/B runs
    )
    served = "bench"
    if args.adapter:
        from art.engines.torch.random_adapter import save_random_adapter

        base_dir = engine.hf_model.config._name_or_path
        engine.load_adapter("bench@1", save_random_adapter(base_dir, Path(tmp.name) / "adapter", scale=0.1))
        served = "bench@1"
    server = ServerThread(create_app(engine, api_key="bench"))
    url = server.start()
    load_s = time.perf_counter() - t0
    prompts = [[{"role": "user", "content": QUESTIONS[i % len(QUESTIONS)]}] for i in range(args.requests)]

    async def run() -> list[tuple[int, float]]:
        client = openai.AsyncOpenAI(base_url=url, api_key="bench", max_retries=0, timeout=3600)
        await _phase(client, served, prompts[:2], 4, concurrent=True)  # warm-up
        # Each phase starts without the prompt starts the engine kept from the one before (same prompts).
        await engine.run(engine.release_idle_cache)
        sequential = await _phase(client, served, prompts, max_tokens, concurrent=False)
        await engine.run(engine.release_idle_cache)
        concurrent = await _phase(client, served, prompts, max_tokens, concurrent=True)
        return [sequential, concurrent]

    try:
        (seq_tokens, seq_s), (con_tokens, con_s) = asyncio.run(run())
    finally:
        server.stop()
        asyncio.run(engine.close())
        tmp.cleanup()
    seq_rate, con_rate = seq_tokens / seq_s, con_tokens / con_s
    ratio = con_rate / seq_rate
    name = "tiny (quick)" if args.quick else args.model
    print(
        f"\nbench_serving: model={name} dtype={engine.hf_model.dtype} adapter={served if args.adapter else 'none'} "
        f"threads={torch.get_num_threads()} max_tokens={max_tokens} load={load_s:.1f}s"
    )
    print(
        f"| {'mode':<28} | {'requests':>8} | {'tokens':>7} | {'seconds':>8} | {'tokens/s':>9} | {'ratio':>6} |"
    )
    print(f"|{'-' * 30}|{'-' * 10}|{'-' * 9}|{'-' * 10}|{'-' * 11}|{'-' * 8}|")
    print(
        f"| {'(a) one request at a time':<28} | {args.requests:>8} | {seq_tokens:>7} | {seq_s:>8.2f} | {seq_rate:>9.1f} | {1.0:>6.2f} |"
    )
    print(
        f"| {f'(b) {args.requests} concurrent':<28} | {args.requests:>8} | {con_tokens:>7} | {con_s:>8.2f} | {con_rate:>9.1f} | {ratio:>6.2f} |"
    )
    met = ratio >= 3.0
    print(f"target: concurrent >= 3x one-at-a-time: {'met' if met else 'NOT met'} ({ratio:.2f}x)")
    return 0 if met else 1


if __name__ == "__main__":
    sys.exit(main())
