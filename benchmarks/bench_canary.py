"""The canary's separation: what it measures for a correct adapter and for a zeroed, stale or x2-scaled one,
per engine and dtype (issue 40; the table in docs/gpu.md comes from here).

    python benchmarks/bench_canary.py                    # default model (SmolLM2-135M), torch engine, fp32 + bf16
    python benchmarks/bench_canary.py --vllm-python PY    # vLLM too (e.g. ~/.cache/art/vllm-venv/bin/python)
    python benchmarks/bench_canary.py --quick             # tiny random model made on the spot (what tests run)
    python benchmarks/bench_canary.py --quick --device cuda  # the same on a GPU (the torch engine on cuda)

For each engine x dtype: register a model (the canary's noise floor is measured then, engine vs trainer on the
base model); then per round, train two SFT steps (at the round's learning rate and twice it: a small effect
on the probe, a few hundredths to tenths of a nat per token), serve the second step from four adapters in
turn under its own name and run the service's real check on each:

- correct: the step's checkpoint;
- zeroed: the step with every LoRA B set to zero (the adapter is lost);
- stale: the step before's checkpoint (the engine did not pick up the new step);
- x2: the step with every LoRA B doubled (a wrong scaling).

Columns: raw = mean |served - trained| nats per token; c = the served effect's error as a fraction of the
trained effect (0 when served equals trained; -1 zeroed, ~+1 doubled); c step = the same against the step's own
change (-1 stale); verdict = what the check decided. The last line is a JSON summary (tests read it).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

VARIANTS = ("correct", "zeroed", "stale", "x2")
SFT_DATA = [
    ("What is the digit?", "7"),
    ("Say hello.", "Hello! How can I help you today?"),
    ("Name a colour.", "Blue."),
    ("What is the capital of Italy?", "Rome."),
]


@dataclass
class Row:
    """The check on one served adapter."""

    variant: str
    passed: bool
    raw: float
    effect_error: float | None = None
    step_error: float | None = None
    message: str = ""


@dataclass
class Separation:
    """One engine x dtype: its noise floor, the two steps' own canary metrics, and the four rows."""

    engine: str
    dtype: str
    noise_floor: float
    adapter_effect: float
    learning_rate: float = 0.0
    step_metrics: list[dict[str, float]] = field(default_factory=list)
    rows: list[Row] = field(default_factory=list)
    seconds: float = 0.0

    def row(self, variant: str) -> Row:
        return next(r for r in self.rows if r.variant == variant)


def scaled_copy(checkpoint: Path, dest: Path, scale: float) -> Path:
    """A copy of a PEFT checkpoint with every LoRA B multiplied by `scale`."""
    from safetensors.torch import load_file, save_file

    shutil.copytree(checkpoint, dest)
    weights = dest / "adapter_model.safetensors"
    tensors = load_file(str(weights))
    save_file({k: v * scale if "lora_B" in k else v for k, v in tensors.items()}, str(weights))
    return dest


async def separation(
    options: Any, base_model: str, workdir: Path, *, rounds: Sequence[float] = (1e-4,)
) -> list[Separation]:
    """Register, then per round (a learning rate): train two SFT steps (at it and twice it) and check the four
    served adapters of the second against the first (see the module docstring). Rounds share the registration
    (and the trainer: a later round's adapter carries the earlier rounds' effect too)."""
    import art
    from art.service.service import CanaryError

    model = art.TrainableModel(name="canary", project="bench", base_model=base_model, base_path=str(workdir))
    data = [
        art.Trajectory(
            messages_and_choices=[{"role": "user", "content": q}, {"role": "assistant", "content": a}]
        )
        for q, a in SFT_DATA
    ]
    results = []
    async with art.LocalBackend(options=options, progress=False) as backend:
        await model.register(backend)
        service = backend.service(model)
        engine, adapters, noise = service.engine, service.adapters, service._noise
        assert engine is not None and adapters is not None and noise is not None
        for learning_rate in rounds:
            start = time.perf_counter()
            result = Separation(
                engine=options.engine,
                dtype=engine.compute_dtype.removeprefix("torch."),
                noise_floor=noise.mean_abs,
                adapter_effect=0.0,
                learning_rate=learning_rate,
            )
            for factor in (1, 2):
                trained = await model.train_sft(
                    data, art.TrainSFTConfig(learning_rate=learning_rate * factor, batch_size=2)
                )
                result.step_metrics.append(
                    {k: v for k, v in trained.metrics.items() if k.startswith("canary_")}
                )
                if factor == 1:
                    before, first_probe = trained.step, service._published_probe
            step = before + 1
            result.adapter_effect = result.step_metrics[-1]["canary_adapter_effect"]
            checkpoint = model.storage.checkpoint_dir(step)
            sources = {
                "correct": checkpoint,
                "zeroed": scaled_copy(checkpoint, workdir / f"zeroed-{step}", 0.0),
                "stale": model.storage.checkpoint_dir(before),
                "x2": scaled_copy(checkpoint, workdir / f"x2-{step}", 2.0),
            }
            for variant in VARIANTS:
                # Serve `variant` as the step, the published step's reference set back to the one before it
                # (as while a step is being checked).
                source = sources[variant]
                await engine.run(lambda: adapters.load(step, path=source))  # noqa: B023 (awaited at once)
                service._published_probe = first_probe
                try:
                    metrics, _ = await service._canary(step)
                    result.rows.append(
                        Row(
                            variant,
                            True,
                            metrics["canary_logprob_diff"],
                            metrics.get("canary_effect_error"),
                            metrics.get("canary_step_error"),
                        )
                    )
                except CanaryError as exc:
                    r = exc.reading
                    raw, c, c_step = (r.raw, r.effect_error, r.step_error) if r else (math.nan, None, None)
                    result.rows.append(Row(variant, False, raw, c, c_step, str(exc)))
            await engine.run(lambda: adapters.load(step))  # noqa: B023 (awaited at once)
            service._published_probe = (await service._canary(step))[1]
            result.seconds = time.perf_counter() - start
            results.append(result)
    return results


def table(results: list[Separation]) -> str:
    lines = [
        "| engine | dtype | noise floor | lr | adapter effect | adapter | raw | c | c step | verdict |",
        "|---|---|---:|---:|---:|---|---:|---:|---:|---|",
    ]

    def fmt(x: float | None) -> str:
        return "-" if x is None or x != x else f"{x:+.3f}" if abs(x) >= 1e-3 else f"{x:.1e}"

    for s in results:
        for row in s.rows:
            lines.append(
                f"| {s.engine} | {s.dtype} | {s.noise_floor:.2g} | {s.learning_rate:g} | {s.adapter_effect:.3f} | "
                f"{row.variant} | "
                f"{fmt(row.raw)} | {fmt(row.effect_error)} | {fmt(row.step_error)} | "
                f"{'pass' if row.passed else 'FAIL'} |"
            )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a tiny random model made on the spot")
    parser.add_argument("--base-model", default=None, help="default: SmolLM2-135M (or the tiny model)")
    parser.add_argument("--vllm-python", default=None, help="a Python with vLLM: adds the vllm engine rows")
    parser.add_argument("--dtypes", default="float32,bfloat16")
    parser.add_argument("--device", default="cpu", help='"cpu", or "cuda" on a GPU machine (torch engine)')
    parser.add_argument(
        "--learning-rates",
        default=None,
        help="comma-separated rounds (default: 6e-5,1.5e-4 with --quick, 3e-5,1e-4 on the default model)",
    )
    args = parser.parse_args()

    import art
    from art.testing.tiny_model import make_tiny_model

    workdir = Path(tempfile.mkdtemp(prefix="bench-canary-"))
    if args.base_model:
        base_model = args.base_model
    elif args.quick:  # heads of 64: what vLLM's CPU attention takes
        base_model = str(
            make_tiny_model(workdir / "tiny", hidden_size=256, num_heads=4, num_kv_heads=2, embedding_std=0.1)
        )
    else:
        base_model = "smollm2-135m"
    rounds = [
        float(x) for x in (args.learning_rates or ("6e-5,1.5e-4" if args.quick else "3e-5,1e-4")).split(",")
    ]
    engines = ["torch"] + (["vllm"] if args.vllm_python else [])
    results: list[Separation] = []
    for engine in engines:
        for dtype in args.dtypes.split(","):
            extra: dict[str, Any] = {}
            if engine == "vllm":
                extra = {"vllm_python": args.vllm_python, "vllm_env": {"VLLM_CPU_KVCACHE_SPACE": "1"}}
            options = art.RuntimeOptions(
                engine=engine, device=args.device, dtype=dtype, max_model_len=1024, max_num_seqs=8, **extra
            )
            run_dir = workdir / f"{engine}-{dtype}"
            run_dir.mkdir()
            start = time.perf_counter()
            results += asyncio.run(separation(options, base_model, run_dir, rounds=rounds))
            print(f"{engine} {dtype}: {time.perf_counter() - start:.0f} s", file=sys.stderr, flush=True)
    print(
        f"device: {args.device}; base model: {base_model}; "
        "per round two SFT steps at the round's learning rate (lr) and twice it\n"
    )
    print(table(results))
    print(json.dumps([asdict(r) for r in results]))
    shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    main()
