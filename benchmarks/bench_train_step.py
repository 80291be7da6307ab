"""One GRPO training step on synthetic groups: phase breakdown, throughput and peak memory.

    python benchmarks/bench_train_step.py                      # default model, 4 groups x 8 x 256 tokens
    python benchmarks/bench_train_step.py --model PATH_OR_ID   # any causal LM
    python benchmarks/bench_train_step.py --quick              # tiny model made on the spot (< 60 s)
    python benchmarks/bench_train_step.py --groups 2 --alternate ART_TRAIN_CPP_ATTENTION --steps 10
                                        # a switch off/on in alternate steps of one process: the ratio

The groups look like real rollouts to the trainer: a chat prompt rendered with the model's template and a
sampled completion (random token ids with made-up logprobs, ending with the end-of-turn token), random
rewards. Everything else is the real `Trainer.train_step`; between steps, as in the service, `release_if_short`
(`malloc_trim` when the machine is short of memory; reported apart, not in the step's time). The model is loaded the way the service loads it
(`art.base_model.loader`, dtype chosen by hardware unless `--dtype`).

Reported: each phase of the step (seconds and share), the step's CPU time (on a shared machine, CPU time /
threads is what the step costs with the cores to itself), tokens/s through forward+backward, an estimate of
the achieved matmul rate (FLOPs counted below), and peak RSS of the process (must stay < 8 GiB on the default
model).

`--alternate VAR` sets the runtime switch that the environment variable VAR overrides (one of
`ALTERNATABLE`; `art.types.ENV_OVERRIDES` maps each to its `RuntimeOptions` field) to "0" and "1" (or the two
`--values`) in alternate steps (order 1, 0, 0, 1, 1, 0, ...; the first two steps warm up and are not counted)
and prints the median forward + backward of each setting and their ratio, measured in the same process.
"""

from __future__ import annotations

import argparse
import os
import random
import resource
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ALTERNATABLE = (
    "ART_TRAIN_CPP_ATTENTION",
    "ART_TRAIN_COMPILE",
    "ART_TRAIN_SHARED_PREFIX",
    "ART_RELEASE_MEMORY",
)
"""The switches `--alternate` can flip between steps of one process (the trainer reads them at each step)."""

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")


def apply_switches(trainer: Any, options: Any) -> None:
    """Make the trainer use `options`' training switches from its next step on."""
    trainer.options = options
    if trainer.fast_decoder is not None:
        trainer.fast_decoder.cpp_attention = options.train_cpp_attention
        trainer.fast_decoder.compile = options.train_compile
        trainer.fast_decoder.shared_prefix = options.train_shared_prefix


def rss_gib() -> float:
    """Current resident set size of this process in GiB."""
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**30


def peak_rss_gib() -> float:
    """Peak resident set size of this process so far, in GiB (Linux reports KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20


def cpu_summary() -> str:
    """CPU model name and the flags that matter for bf16 matmuls."""
    try:
        info = Path("/proc/cpuinfo").read_text()
    except OSError:
        return "unknown CPU"
    name = next((ln.split(":", 1)[1].strip() for ln in info.splitlines() if ln.startswith("model name")), "?")
    flags = next((ln.split(":", 1)[1].split() for ln in info.splitlines() if ln.startswith("flags")), [])
    wanted = [f for f in ("avx2", "avx512f", "avx512_bf16", "amx_bf16", "amx_tile") if f in flags]
    return f"{name} ({os.cpu_count()} cpus; {' '.join(wanted)})"


def make_groups(
    tokenizer: Any, chat_template: Any, *, groups: int, size: int, tokens: int, prompt_tokens: int, seed: int
) -> list[Any]:
    """Synthetic groups whose every sequence is `tokens` long, about `prompt_tokens` of which are prompt."""
    from openai.types.chat.chat_completion import Choice

    from art.trajectories import Trajectory, TrajectoryGroup

    rng = random.Random(seed)
    special = set(tokenizer.all_special_ids)
    normal = [i for i in range(len(tokenizer)) if i not in special]
    words = [
        "the",
        "quick",
        "brown",
        "fox",
        "jumps",
        "over",
        "a",
        "lazy",
        "dog",
        "while",
        "seven",
        "tic",
        "tac",
        "toe",
        "boards",
        "wait",
    ]
    out = []
    for g in range(groups):
        filler = " ".join(rng.choice(words) for _ in range(prompt_tokens))
        messages = [
            {"role": "system", "content": "You are a helpful assistant."},
            {"role": "user", "content": f"Scenario {g}: {filler}"},
        ]
        prompt_ids = chat_template.render_ids(messages, add_generation_prompt=True)
        # Trim the filler until the prompt is about prompt_tokens long.
        while len(prompt_ids) > prompt_tokens and " " in messages[1]["content"]:
            messages[1]["content"] = messages[1]["content"].rsplit(" ", 1)[0]
            prompt_ids = chat_template.render_ids(messages, add_generation_prompt=True)
        n = max(2, tokens - len(prompt_ids))
        trajectories = []
        for _ in range(size):
            ids = [rng.choice(normal) for _ in range(n - 1)] + [tokenizer.eos_token_id]
            choice = Choice.model_validate(
                {
                    "index": 0,
                    "finish_reason": "stop",
                    "message": {"role": "assistant", "content": tokenizer.decode(ids[:-1])},
                    "logprobs": {
                        "content": [
                            {
                                "token": "x",
                                "logprob": -rng.uniform(0.1, 3.0),
                                "bytes": None,
                                "top_logprobs": [],
                            }
                            for _ in ids
                        ]
                    },
                    "token_ids": ids,
                    "checkpoint_step": 0,
                }
            )
            trajectories.append(Trajectory(messages_and_choices=[*messages, choice], reward=rng.random()))
        out.append(TrajectoryGroup(trajectories))
    return out


def estimate_flops(model: Any, metrics: dict[str, float]) -> float:
    """FLOPs of the step's forward + backward, counting matmuls only.

    Per real token: forward 2 x (linear weights of the decoder), backward through activations the same
    again (the base is frozen, so no weight gradients except LoRA's, counted as 2 x 2 x LoRA params).
    Attention scores and values: 2 x 2 x T x hidden per layer per token, forward, and twice that backward.
    LM head only on assistant tokens: forward, recompute in backward, gradient to hidden (3 x 2 x H x V).
    """
    base = model.get_base_model() if hasattr(model, "get_base_model") else model
    cfg = base.config
    decoder_linear = sum(
        p.numel()
        for n, p in base.named_parameters()
        if p.dim() == 2 and "embed" not in n and "lora_" not in n
    )
    if not cfg.tie_word_embeddings:
        decoder_linear -= base.get_output_embeddings().weight.numel()
    lora = sum(p.numel() for n, p in base.named_parameters() if "lora_" in n)
    tokens = metrics["num_padded_tokens"]
    seq = tokens / max(metrics["num_sequences"], 1)
    attention = 2 * 2 * seq * cfg.hidden_size * cfg.num_hidden_layers
    per_token = 2 * decoder_linear * 2 + 2 * lora * 3 + attention * 3
    head = 3 * 2 * cfg.hidden_size * cfg.vocab_size * metrics["num_assistant_tokens"]
    return float(tokens * per_token + head)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--model", default="smollm2-135m", help="short name, local folder or Hugging Face id")
    parser.add_argument("--quick", action="store_true", help="tiny random model made on the spot, small step")
    parser.add_argument("--groups", type=int, default=4)
    parser.add_argument("--size", type=int, default=8, help="trajectories per group")
    parser.add_argument("--tokens", type=int, default=256, help="tokens per sequence (prompt + completion)")
    parser.add_argument("--prompt-tokens", type=int, default=64)
    parser.add_argument("--micro-batch-tokens", type=int, default=4096)
    parser.add_argument("--dtype", default=None, help="bf16 / float32; default: what the service would pick")
    parser.add_argument(
        "--steps", type=int, default=2, help="steps to run; the last one is reported (the first compiles)"
    )
    parser.add_argument("--kl", type=float, default=0.0, help="kl_penalty_coef (adds a base-model forward)")
    parser.add_argument(
        "--max-step-kl",
        default="default",
        help="the trust region's bound (TrainSpec.max_step_kl): a number, 'none' (no check) or 'default'",
    )
    parser.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's choice)")
    parser.add_argument(
        "--alternate",
        metavar="VAR",
        choices=ALTERNATABLE,
        help='set the switch VAR to "0" / "1" in alternate steps; print both medians',
    )
    parser.add_argument(
        "--values",
        default="0,1",
        metavar="A,B",
        help="the two values --alternate sets (default 0,1), e.g. never,always for ART_RELEASE_MEMORY",
    )
    args = parser.parse_args(argv)
    if args.alternate and args.steps < 4:
        parser.error("--alternate needs --steps >= 4 (two warm-up steps, then at least one of each setting)")
    values = args.values.split(",")
    if len(values) != 2 or not all(values) or values[0] == values[1]:
        parser.error(f"--values needs two different values separated by a comma, got {args.values!r}")

    import torch

    from art.base_model.loader import choose_dtype, load_model_and_tokenizer
    from art.chat.chat_template import ChatTemplate
    from art.kernels.allocator import release_if_short
    from art.training.trainer import Trainer
    from art.types import RuntimeOptions, TrainSpec

    if args.threads:
        torch.set_num_threads(args.threads)
    tmp = None
    if args.quick:
        from art.testing.tiny_model import make_tiny_model

        tmp = tempfile.TemporaryDirectory(prefix="art-bench-")
        args.model = str(make_tiny_model(tmp.name))
        args.groups, args.size, args.tokens, args.prompt_tokens = 2, 4, 96, 32
        args.micro_batch_tokens = min(args.micro_batch_tokens, 256)
        args.steps = max(args.steps, 2)

    t0 = time.perf_counter()
    dtype = choose_dtype(args.dtype)
    model, tokenizer = load_model_and_tokenizer(args.model, dtype=dtype)
    load_s = time.perf_counter() - t0
    chat_template = ChatTemplate(tokenizer)
    options = RuntimeOptions().with_env_overrides()
    trainer = Trainer(model, chat_template, options=options)
    rss_loaded = rss_gib()
    bound = {} if args.max_step_kl == "default" else {"max_step_kl": None}
    if args.max_step_kl not in ("default", "none"):
        bound = {"max_step_kl": float(args.max_step_kl)}
    spec = TrainSpec(
        learning_rate=1e-5, micro_batch_tokens=args.micro_batch_tokens, kl_penalty_coef=args.kl, **bound
    )

    print(f"machine: {cpu_summary()}; torch {torch.__version__}, {torch.get_num_threads()} threads")
    print(
        f"model: {args.model} ({type(model).__name__}, {dtype}, "
        f"{sum(p.numel() for p in model.parameters()) / 1e6:.1f}M params incl. LoRA), loaded in {load_s:.1f} s"
    )
    print(
        f"step: {args.groups} groups x {args.size} trajectories x ~{args.tokens} tokens "
        f"(~{args.prompt_tokens} prompt), micro_batch_tokens={args.micro_batch_tokens}, loss={spec.loss_fn}"
        + (f", kl={args.kl}" if args.kl else "")
        + f", max_step_kl={spec.max_step_kl}"
    )
    metrics: dict[str, float] = {}
    off_value, on_value = values
    settings = [on_value, off_value] + [
        (off_value, on_value, on_value, off_value)[i % 4] for i in range(max(0, args.steps - 2))
    ]
    timed: dict[str, list[float]] = {off_value: [], on_value: []}
    for step in range(args.steps):
        if args.alternate:
            options = RuntimeOptions().with_env_overrides({args.alternate: settings[step]})
            apply_switches(trainer, options)
        groups = make_groups(
            tokenizer,
            chat_template,
            groups=args.groups,
            size=args.size,
            tokens=args.tokens,
            prompt_tokens=args.prompt_tokens,
            seed=step,
        )
        # What the service does between steps (after each one); here before, so that with `--alternate
        # ART_RELEASE_MEMORY` the step that pays for a release is the one counted under its setting.
        t = time.perf_counter()
        released = release_if_short(options.release_memory)
        release_s = time.perf_counter() - t
        start, cpu_start = time.perf_counter(), time.process_time()
        faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
        report = trainer.train_step(groups, spec, current_step=step, progress=False)
        metrics = report.metrics
        wall, cpu = time.perf_counter() - start, time.process_time() - cpu_start
        faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt - faults
        # On a shared machine, CPU time / threads is what the step would take with the cores to itself.
        print(
            f"  step {step}: {wall:.2f} s wall, {cpu:.1f} s CPU = {cpu / torch.get_num_threads():.1f} s on "
            f"{torch.get_num_threads()} free cores ({cpu / wall / torch.get_num_threads():.0%} of them used), "
            f"{faults / 1000:.0f}k page faults, loss {metrics['loss']:.4f}"
            + (f", memory released before it in {release_s:.2f} s" if released else "")
            + (f" [{args.alternate}={settings[step]}]" if args.alternate else "")
        )
        if args.alternate and step >= 2:
            timed[settings[step]].append(metrics["forward_s"] + metrics["backward_s"])
    if args.alternate:
        import statistics

        on, off = statistics.median(timed[on_value]), statistics.median(timed[off_value])
        print(
            f"\n{args.alternate}: forward+backward median {on:.2f} s with {on_value} ({len(timed[on_value])} "
            f"steps), {off:.2f} s with {off_value} ({len(timed[off_value])} steps): "
            f"{off_value} / {on_value} = {off / on:.2f}x"
        )

    total = metrics["step_s"]
    phases = [
        "tokenize_s",
        "collate_s",
        "ref_forward_s",
        "forward_s",
        "backward_s",
        "optimizer_s",
        "trust_region_s",
    ]
    other = total - sum(metrics.get(p, 0.0) for p in phases)
    print()
    print(f"{'phase':<16}{'seconds':>10}{'share':>9}")
    for phase in phases:
        if phase in metrics:
            print(f"{phase:<16}{metrics[phase]:>10.3f}{metrics[phase] / total:>9.1%}")
    print(f"{'other':<16}{other:>10.3f}{other / total:>9.1%}")
    print(f"{'step_s':<16}{total:>10.3f}{1:>9.0%}")
    print()
    flops = estimate_flops(trainer.model, metrics)
    fb = metrics["forward_s"] + metrics["backward_s"]
    print(
        f"tokens: {metrics['num_tokens']:.0f} real, {metrics['num_padded_tokens']:.0f} padded, "
        f"{metrics['num_assistant_tokens']:.0f} trained; {metrics['num_micro_batches']:.0f} micro-batches"
    )
    print(f"throughput: {metrics['num_tokens'] / fb:.0f} tokens/s forward+backward")
    print(f"matmul work: {flops / 1e12:.2f} TFLOP (estimate), {flops / fb / 1e9:.0f} GFLOP/s achieved")
    peak = peak_rss_gib()
    print(f"memory: RSS after load {rss_loaded:.2f} GiB, peak RSS {peak:.2f} GiB (limit 8 GiB)")
    if tmp is not None:
        tmp.cleanup()
    return 0 if peak < 8 else 1


if __name__ == "__main__":
    sys.exit(main())
