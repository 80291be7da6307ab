"""How often the SFT learning test's recipe teaches both answers, over LoRA seeds, in float32 and bf16.

    python benchmarks/sft_seeds.py                          # the test's recipe, 48 seeds per dtype
    python benchmarks/sft_seeds.py --steps 20 --lr 1.5e-2 --min-lr 1e-3   # the recipe before 2026-11-26

`tests/backends/test_sft_local.py::test_sft_teaches_the_served_model_its_answers` teaches a random tiny model
(hidden 128, embeddings std 0.1) two answers through `LocalBackend` and asks for both by greedy decoding. The
model hardly tells the two prompts apart at the answer's position, so some LoRA initialisations sit on a
plateau (the same answer for both; loss ~3% of its start) for many steps. Another seed, or another device's
rounding (CUDA bf16 on an H200 with the 20-step recipe: ['dog', 'dog']), can land there: this script measures
how often, so the test's recipe is one that escapes it on nearly every seed in both dtypes. Last line: JSON.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("WANDB_MODE", "disabled")

TARGETS = [("What is the digit?", "7"), ("The quick brown fox", "dog")]


async def one(
    path: Path, workdir: Path, dtype: str, seed: int, args: argparse.Namespace
) -> tuple[bool, list[str]]:
    """Train the recipe once with LoRA seed `seed`; whether greedy decoding gives both answers, and what it gave."""
    import art
    from art.local import LocalBackend
    from art.utils.sft import create_lr_schedule

    model = art.TrainableModel(name="sft", project="seeds", base_model=str(path), base_path=str(workdir))
    options = art.RuntimeOptions(dtype=dtype, seed=seed, device=args.device)
    async with LocalBackend(progress=False, options=options) as backend:
        await model.register(backend)
        data = [
            art.Trajectory(
                messages_and_choices=[{"role": "user", "content": q}, {"role": "assistant", "content": a}]
            )
            for q, a in TARGETS
        ] * args.steps
        schedule = create_lr_schedule(args.steps, args.lr, "linear", min_lr=args.min_lr)
        await model.train_sft(data, art.TrainSFTConfig(learning_rate=schedule, batch_size=2))
        got = []
        for question, _ in TARGETS:
            response = await model.openai_client().chat.completions.create(
                model=model.get_inference_name(),
                messages=[{"role": "user", "content": question}],
                max_tokens=6,
                temperature=0.0,
            )
            got.append(response.choices[0].message.content or "")
    return got == [a for _, a in TARGETS], got


async def main(args: argparse.Namespace) -> dict[str, object]:
    from art.testing.tiny_model import make_tiny_model

    root = Path(tempfile.mkdtemp(prefix="sft-seeds-"))
    path = make_tiny_model(root / "model", embedding_std=0.1, hidden_size=128, intermediate_size=256)
    summary: dict[str, object] = {
        "steps": args.steps,
        "lr": args.lr,
        "min_lr": args.min_lr,
        "seeds": args.seeds,
    }
    for dtype in args.dtypes.split(","):
        misses: dict[int, list[str]] = {}
        start = time.perf_counter()
        for seed in range(args.seeds):
            ok, got = await one(path, root / f"{dtype}-{seed}", dtype, seed, args)
            if not ok:
                misses[seed] = got
        taught = args.seeds - len(misses)
        print(
            f"{dtype}: both answers taught in {taught} of {args.seeds} seeds "
            f"({time.perf_counter() - start:.0f} s); misses: {misses}",
            flush=True,
        )
        summary[dtype] = {"taught": taught, "misses": {str(k): v for k, v in misses.items()}}
    return summary


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--steps", type=int, default=40, help="optimiser steps (batches of the two examples)")
    parser.add_argument("--lr", type=float, default=8e-3, help="peak learning rate, decayed linearly")
    parser.add_argument("--min-lr", type=float, default=5e-4)
    parser.add_argument("--seeds", type=int, default=48)
    parser.add_argument("--dtypes", default="float32,bfloat16")
    parser.add_argument("--device", default="cpu")
    parsed = parser.parse_args()
    print(json.dumps(asyncio.run(main(parsed))), file=sys.stdout)
