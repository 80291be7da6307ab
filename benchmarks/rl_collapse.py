"""The RL learning test's mid-run collapse, taken apart: is it bf16 arithmetic or the step size?

    python benchmarks/rl_collapse.py              # bf16 rollouts, LoRA seed 14, constant 1e-2 (rl_seeds.py)
    python benchmarks/rl_collapse.py --seed 3

Trains as `benchmarks/rl_seeds.py --decay-steps 0` does until the mean reward halves in one step (from above
0.3), then replays the update that did it (same checkpoint, same groups) in a bf16 trainer and in a float32
trainer, at the learning rate used and at half of it, and prints the policy's entropy on those groups' tokens
before and after, and the GRPO loss after. If float32 collapses as bf16 does, the dtype is not the cause.
Last line: JSON.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))

from rl_seeds import mean_reward, play


async def until_collapse(
    path: Path, workdir: Path, args: argparse.Namespace
) -> tuple[list[float], Any, Path]:
    """Train at a constant rate; the rewards so far, the groups and the checkpoint of the update that collapsed."""
    import art
    from art.local import LocalBackend

    model = art.TrainableModel(
        name="digits", project="collapse", base_model=str(path), base_path=str(workdir)
    )
    options = art.RuntimeOptions(dtype=args.dtype, seed=args.seed, device="cpu")
    rewards: list[float] = []
    kept: list[Any] = []
    async with LocalBackend(progress=False, options=options) as backend:
        await model.register(backend)
        for step in range(args.steps):
            groups = await play(model, step)
            rewards.append(mean_reward(groups))
            print(f"step {step}: reward {rewards[-1]:.3f}", flush=True)
            if step and rewards[-2] > 0.3 and rewards[-1] < rewards[-2] / 2:
                return rewards, kept[-1], model.storage.checkpoint_dir(step - 1)
            kept.append(groups)
            await model.train(groups, config=art.TrainConfig(learning_rate=args.lr))
    raise SystemExit(f"no collapse in {args.steps} steps with seed {args.seed}: try another --seed")


def replay(
    path: Path, checkpoint: Path, groups: Any, dtype: str, lr: float, seed: int, step: int
) -> dict[str, float]:
    """The same update from the same state in a fresh trainer of `dtype`: entropy before/after, loss after."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from art.chat.chat_template import ChatTemplate
    from art.training.prepare import prepare_step
    from art.training.trainer import Trainer
    from art.types import RuntimeOptions, TrainSpec

    base = AutoModelForCausalLM.from_pretrained(path, dtype=getattr(torch, dtype))
    trainer = Trainer(
        base,
        ChatTemplate(AutoTokenizer.from_pretrained(path)),
        seed=seed,
        options=RuntimeOptions(dtype=dtype),
    )
    trainer.load(checkpoint)
    report = trainer.train_step(groups, TrainSpec(learning_rate=lr), current_step=step, progress=False)
    sequences = prepare_step(groups, trainer.tokenizer, TrainSpec(), current_step=step + 1).sequences
    after = trainer.accumulate_gradients(sequences, TrainSpec())
    return {
        "entropy_before": round(report.metrics["entropy"], 3),
        "grad_norm": round(report.metrics["grad_norm"], 3),
        "entropy_after": round(after["entropy"], 3),
        "loss_after": round(after["loss"], 3),
    }


async def main(args: argparse.Namespace) -> dict[str, object]:
    from art.testing.tiny_model import make_tiny_model

    root = Path(tempfile.mkdtemp(prefix="rl-collapse-"))
    path = make_tiny_model(root / "model", embedding_std=0.1)
    rewards, groups, checkpoint = await until_collapse(path, root / "record", args)
    step = len(rewards) - 2
    print(f"the update of step {step} took the reward from {rewards[-2]:.3f} to {rewards[-1]:.3f}; replayed:")
    summary: dict[str, object] = {"seed": args.seed, "rollouts": args.dtype, "rewards": rewards}
    for dtype in ("bfloat16", "float32"):
        for lr in (args.lr, args.lr / 2):
            result = replay(path, checkpoint, groups, dtype, lr, args.seed, step)
            print(f"  {dtype:8} trainer, lr {lr:g}: {result}", flush=True)
            summary[f"{dtype}@{lr:g}"] = result
    return summary


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument(
        "--seed", type=int, default=14, help="LoRA seed (rl_seeds.py: 0, 1, 3, 14, 18 collapse in bf16)"
    )
    parser.add_argument("--dtype", default="bfloat16", help="the service's dtype for the rollouts and steps")
    parser.add_argument("--lr", type=float, default=1e-2)
    parser.add_argument("--steps", type=int, default=14)
    parsed = parser.parse_args()
    print(json.dumps(asyncio.run(main(parsed))), file=sys.stdout)
