"""The configuration GPU users train in, checked end to end on a GPU: bf16, the torch engine, device="cuda".

    python benchmarks/gpu_check.py                        # on a machine with a CUDA GPU (issue 40, item 6)
    python benchmarks/gpu_check.py --device cpu --quick   # the same phases on the CPU (what the test runs)

The GPU machines lent here are offline and bare: no vLLM, and no pydantic, fastapi, uvicorn or openai.
`benchmarks/gpu_wheels.sh` downloads those as wheels for the machine's Python; the command there starts with
`pip install --no-index --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site:src`. The model is
made on the spot (random weights, a tokenizer trained here): nothing is downloaded.

Phases, each timed, with the peak memory it reached (GPU: `torch.cuda.max_memory_allocated`, reset before
each phase; CPU: the process's peak RSS so far):

1. make model     a random Llama (`--hidden`, `--layers`) with a trained model's embedding spread
2. register       load, start the engine and the trainer, measure the canary's noise floor, canary step 0
3. serve          `--chats` concurrent chat completions with logprobs through the OpenAI client
4. rl steps       3 GRPO steps on groups of rollouts (reward: distinct characters, so groups differ)
5. sft step       1 SFT step (two batches) on fixed answers
6. served=trained the engine's logprobs of rollouts vs the trainer's, per token, after the last step

It fails (exit 1) when a phase raises, a step is not published, the canary's metrics are missing, or the
served logprobs differ from the trainer's by more than the canary's tolerance for the dtype. The last line is
a JSON summary (tests read it); on a GPU, commit the output under benchmarks/results/.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import platform
import resource
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("WANDB_MODE", "disabled")
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

PROMPTS = ["Say a number.", "Name a colour.", "Greet me.", "Count to three."]


@dataclass
class Phase:
    name: str
    seconds: float
    peak_mib: float
    note: str = ""


@dataclass
class Report:
    device: str
    device_name: str
    dtype: str
    phases: list[Phase] = field(default_factory=list)
    checks: dict[str, Any] = field(default_factory=dict)
    ok: bool = True


class Memory:
    """Peak memory per phase: CUDA's allocator on a GPU, the process's peak RSS on the CPU."""

    def __init__(self, device: str) -> None:
        import torch

        self.torch = torch
        self.cuda = device.startswith("cuda")

    def reset(self) -> None:
        if self.cuda:
            self.torch.cuda.synchronize()
            self.torch.cuda.reset_peak_memory_stats()

    def peak_mib(self) -> float:
        if self.cuda:
            self.torch.cuda.synchronize()
            return float(self.torch.cuda.max_memory_allocated()) / 2**20
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux

    def device_name(self) -> str:
        if self.cuda:
            return str(self.torch.cuda.get_device_name(0))
        return platform.processor() or platform.machine()


@contextlib.contextmanager
def phase(report: Report, memory: Memory, name: str) -> Iterator[dict[str, str]]:
    """Time a phase and record its peak memory; a failure marks the report failed and is re-raised."""
    note: dict[str, str] = {}
    memory.reset()
    start = time.perf_counter()
    try:
        yield note
    except BaseException:
        report.ok = False
        report.phases.append(Phase(name, time.perf_counter() - start, memory.peak_mib(), "FAILED"))
        raise
    report.phases.append(Phase(name, time.perf_counter() - start, memory.peak_mib(), note.get("note", "")))
    print(f"  {name}: {report.phases[-1].seconds:.1f} s {note.get('note', '')}", file=sys.stderr, flush=True)


async def run(args: argparse.Namespace, workdir: Path, report: Report, memory: Memory) -> None:
    """The phases, recorded into `report` as they go (a failing phase raises after it is recorded)."""
    import art
    from art.service.canary import dtype_floor
    from art.testing.tiny_model import make_tiny_model
    from art.training.tokenize import TrajectoryTokenizer

    with phase(report, memory, "make model") as note:
        path = make_tiny_model(
            workdir / "model",
            hidden_size=args.hidden,
            num_layers=args.layers,
            num_heads=args.hidden // 64,
            num_kv_heads=max(1, args.hidden // 128),
            intermediate_size=args.hidden * 2,
            embedding_std=0.1,
        )
        note["note"] = f"hidden {args.hidden}, {args.layers} layers"
    model = art.TrainableModel(
        name="gpu-check", project="bench", base_model=str(path), base_path=str(workdir)
    )
    options = art.RuntimeOptions(
        device=args.device,
        dtype=args.dtype,
        engine="torch",
        max_model_len=1024,
        train_compile=not args.no_compile,
    )
    backend = art.LocalBackend(options=options, progress=False)
    try:
        with phase(report, memory, "register") as note:
            await model.register(backend)
            service = backend.service(model)
            assert service._noise is not None
            report.checks["noise_floor"] = service._noise.mean_abs
            note["note"] = f"canary noise floor {service._noise.mean_abs:.3g}"
        client = model.openai_client()

        async def chat(prompt: str, seed: int) -> Any:
            response = await client.chat.completions.create(
                model=model.get_inference_name(),
                messages=[{"role": "user", "content": prompt}],
                max_tokens=args.max_tokens,
                temperature=1.0,
                seed=seed,
                logprobs=True,
            )
            return response.choices[0]

        with phase(report, memory, "serve") as note:
            start = time.perf_counter()
            choices = await asyncio.gather(*(chat(PROMPTS[i % len(PROMPTS)], i) for i in range(args.chats)))
            tokens = sum(len(c.logprobs.content or []) for c in choices)
            assert all(c.logprobs and c.logprobs.content for c in choices), "a reply came without logprobs"
            note["note"] = f"{args.chats} chats, {tokens / (time.perf_counter() - start):.0f} tokens/s"
            report.checks["serve_tokens_per_s"] = tokens / (time.perf_counter() - start)

        async def group(prompt: str, step: int) -> art.TrajectoryGroup:
            replies = await asyncio.gather(*(chat(prompt, 100 * step + i) for i in range(args.group_size)))
            return art.TrajectoryGroup(
                art.Trajectory(
                    messages_and_choices=[{"role": "user", "content": prompt}, reply],
                    reward=float(len(set(reply.message.content or ""))),  # distinct characters: groups vary
                )
                for reply in replies
            )

        for step in range(3):
            with phase(report, memory, f"rl step {step + 1}") as note:
                groups = [await group(p, step) for p in PROMPTS[:2]]
                result = await model.train(groups, config=art.TrainConfig(learning_rate=args.learning_rate))
                assert result.step == step + 1, f"step {step + 1} was not published: {result.message}"
                canary = {k: v for k, v in result.metrics.items() if k.startswith("canary_")}
                assert "canary_noise_floor" in canary and "canary_logprob_diff" in canary, result.metrics
                report.checks[f"rl_step_{step + 1}"] = canary
                note["note"] = f"canary diff {canary['canary_logprob_diff']:.3g}"
        with phase(report, memory, "sft step") as note:
            data = [
                art.Trajectory(
                    messages_and_choices=[{"role": "user", "content": p}, {"role": "assistant", "content": a}]
                )
                for p, a in zip(PROMPTS, ["7", "Blue.", "Hello!", "One, two, three."], strict=True)
            ]
            result = await model.train_sft(
                data, art.TrainSFTConfig(learning_rate=args.learning_rate, batch_size=2)
            )
            assert result.step == 4, f"the SFT step was not published: {result.message}"
            report.checks["sft_step"] = {k: v for k, v in result.metrics.items() if k.startswith("canary_")}
            note["note"] = f"canary diff {result.metrics['canary_logprob_diff']:.3g}"
        with phase(report, memory, "served=trained") as note:
            engine, trainer = service.engine, service.trainer
            assert engine is not None and trainer is not None
            tokenizer = TrajectoryTokenizer(engine.chat_template)
            diffs: list[float] = []
            for prompt in PROMPTS:
                reply = await chat(prompt, 7)
                trajectory = art.Trajectory(messages_and_choices=[{"role": "user", "content": prompt}, reply])
                (sequence,), _ = tokenizer.tokenize_trajectory(trajectory)
                served = await engine.score(service.served_name(4), sequence.token_ids)
                trained = await engine.run(lambda ids=sequence.token_ids: trainer.logprobs(ids))
                diffs += [abs(a - b) for a, b in zip(served, trained, strict=True)]
            mean = sum(diffs) / len(diffs)
            tolerance = max(dtype_floor(args.dtype).raw, 3 * report.checks["noise_floor"])
            report.checks["served_vs_trained"] = {"mean": mean, "max": max(diffs), "tolerance": tolerance}
            note["note"] = (
                f"mean |served - trained| {mean:.3g} (tolerance {tolerance:.3g}), max {max(diffs):.3g}"
            )
            assert mean <= tolerance, f"served differs from trained by {mean:.4g} (tolerance {tolerance:.3g})"
    finally:
        await backend.close()


def table(report: Report) -> str:
    lines = [
        f"device: {report.device} ({report.device_name}), dtype {report.dtype}, torch engine",
        "",
        "| phase | seconds | peak memory (MiB) | note |",
        "|---|---:|---:|---|",
    ]
    lines += [f"| {p.name} | {p.seconds:.1f} | {p.peak_mib:.0f} | {p.note} |" for p in report.phases]
    lines.append(f"\nresult: {'PASS' if report.ok else 'FAIL'}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--device", default="cuda", help='"cuda" (the check), or "cpu" to try it here')
    parser.add_argument("--dtype", default="bfloat16")
    parser.add_argument("--quick", action="store_true", help="a smaller model and fewer chats")
    parser.add_argument("--hidden", type=int, default=None)
    parser.add_argument("--layers", type=int, default=None)
    parser.add_argument("--chats", type=int, default=None)
    parser.add_argument("--group-size", type=int, default=4)
    parser.add_argument("--max-tokens", type=int, default=16)
    parser.add_argument("--learning-rate", type=float, default=1e-3)
    parser.add_argument(
        "--no-compile", action="store_true", help="skip torch.compile of the trainer's kernels"
    )
    args = parser.parse_args(argv)
    args.hidden = args.hidden or (256 if args.quick else 1024)
    args.layers = args.layers or (2 if args.quick else 8)
    args.chats = args.chats or (8 if args.quick else 64)
    if args.device.startswith("cuda"):
        import torch

        if not torch.cuda.is_available():
            print("gpu_check: no CUDA GPU here; run it with --device cpu to try the phases", file=sys.stderr)
            return 2
    memory = Memory(args.device)
    report = Report(device=args.device, device_name=memory.device_name(), dtype=args.dtype)
    with tempfile.TemporaryDirectory(prefix="gpu-check-") as tmp:
        try:
            asyncio.run(run(args, Path(tmp), report, memory))
        except Exception as exc:  # the table so far, and why
            print(f"gpu_check failed: {type(exc).__name__}: {exc}", file=sys.stderr)
            report.ok = False
            report.checks["error"] = f"{type(exc).__name__}: {exc}"
    print(table(report))
    print(json.dumps(asdict(report)))
    return 0 if report.ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
