"""One GRPO training step: our `Trainer.train_step` vs TRL's `GRPOTrainer`, on the same data.

    python benchmarks/bench_train.py                      # default model, 2 groups x 8 x ~256 tokens
    python benchmarks/bench_train.py --model PATH_OR_ID   # any causal LM
    python benchmarks/bench_train.py --quick              # tiny model made on the spot (< 60 s)

Both sides get the same model (loaded the way the service loads it: `art.base_model.loader`, bf16 where the
CPU has native bf16), the same LoRA adapter (`art.types.LoRAConfig()`: r=8, alpha=16, no dropout, all seven
projections of every layer; TRL's starts from *our* initial A and B, copied over), the same tokens, the same
advantages, the same learning rate and AdamW settings (betas 0.9/0.99, weight decay 0.1, grad-norm clip 1.0,
constant learning rate), and the same loss: CISPO, `-min(ratio, 5).detach() * A * logp_new` summed over the
completion tokens and divided by the step's total completion tokens, with `ratio = exp(logp_new -
logp_sampled)` and no KL term (beta = 0: ours uses KL only when `kl_penalty_coef > 0`). The first step's loss
and gradient norm of both sides are printed as a check that they compute the same update.

What each side computes in one step (the row "seconds/step" is the median of `--repeats` steps after
`--warmup` steps; every step trains on the same groups, continuing from the previous step's adapter):

- ours: exactly what the service runs on its trainer thread (`art.service.service`): `Trainer.train_step`
  (advantages, tokenisation of the trajectories with the sampled token ids spliced in, micro-batches of at most
  `micro_batch_tokens` tokens, one forward + loss + backward each, clip, AdamW), then `release_if_short` (`malloc_trim` when the machine
  is short of memory, see `art.kernels.allocator`), then
  `Trainer.save` of the checkpoint (adapter + optimizer state). The engine's sampled logprobs are the old
  policy: no extra forward pass. Not included (measured in the service by its own benchmark): pausing the
  engine, loading the new adapter into it and the canary.
- TRL (`trl.GRPOTrainer`, driven by its own `train()` loop, so HF Trainer's dataloader, `_prepare_inputs`,
  `training_step`, clip, optimizer and scheduler steps all run): its generation step
  `_generate_and_score_completions` is replaced by one that returns our tokens (prompt left-padded, completion
  right-padded, as TRL's own would), our advantages and the engine's sampled logprobs as
  `old_per_token_logps` (so, like ours, it spends no forward pass on old logprobs and its importance ratio is
  against the sampling policy). Its `_compute_loss` then does what it always does: a forward through its fused
  chunked LM head (on CPU it scores every position of the completion block), the loss, backward. Micro-batches:
  `per_device_train_batch_size` = our rows per micro-batch, `gradient_accumulation_steps` = our number of
  micro-batches. TRL's default `gradient_checkpointing=True` recomputes the decoder forward in backward; the row
  "TRL" uses TRL's defaults; "TRL, no grad. ckpt" turns it off (its fastest setting here). The ratio is taken
  against the faster TRL row. Step time: between consecutive `on_step_end` callbacks (no logging, no saving).
- "TRL incl. generation" (extra information, not comparable data): TRL's unpatched step with its own HF
  `generate` of `--gen-completions` completions of `--gen-tokens` tokens for one prompt (the issue's reference
  point: "about 7 s per step for 4 completions of 32 tokens").

Matmul rate of our training phase (forward_s + backward_s of the step's metrics), counting the useful FLOPs of
the step explicitly (nothing recomputed is credited), with N real tokens, A trained (assistant) tokens,
P = the decoder's projection weights (q,k,v,o,gate,up,down of all layers), P_lora = LoRA parameters, L layers,
d hidden size, V vocabulary, and per sequence of length T the causal attention work (T(T+1)/2 query-key pairs):

    FLOPs = 2 P N                 forward through the frozen projections
          + 2 P N                 backward to the activations (frozen: no weight gradient)
          + 6 P_lora N            LoRA forward, backward to activations, LoRA weight gradients (2 each)
          + 3 * 4 d L sum_seq T(T+1)/2    attention QK^T and AV, forward (4 d per pair) and backward (2x)
          + 2 * 2 d V A           LM head on trained positions, forward and backward to the hidden state

It is compared with two bf16 matmul probes timed in the same run, on the same threads, each the best of three
runs made right after the steps (load only slows a probe; the fastest run is the hardest target): (1) "projections": the
model's own projection shapes (each distinct (in, out) pair of one layer, forward `x W^T` and input gradient
`dy W`) at M = the training micro-batch's token count; (2) "square": one 2048^3 matmul. The target (training
phase >= 50% of the measured rate) uses the projection probe: it is the best this CPU does on the very
matmuls the step is made of (small inner dimension 576, M a few thousand rows), whereas the square probe is the
hardware's peak on an ideal shape, which no 135M-parameter model's matmuls reach.

Overhead: the step minus forward and backward (tokenising, advantages, collation, clip + AdamW, release_if_short,
checkpoint save, bookkeeping), as a share of our step (target < 5%).
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("WANDB_MODE", "disabled")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_train_step import make_groups  # the same synthetic rollouts as the phase benchmark

CPU_FLAGS = ("avx2", "avx512f", "avx512_bf16", "avx512_fp16", "amx_tile", "amx_bf16", "amx_int8")


def machine_summary() -> list[str]:
    """CPU name, the bf16-relevant flags present and absent, and the load average."""
    try:
        info = Path("/proc/cpuinfo").read_text()
    except OSError:
        info = ""
    name = next((ln.split(":", 1)[1].strip() for ln in info.splitlines() if ln.startswith("model name")), "?")
    flags = set(next((ln.split(":", 1)[1].split() for ln in info.splitlines() if ln.startswith("flags")), []))
    have = " ".join(f for f in CPU_FLAGS if f in flags) or "-"
    missing = " ".join(f for f in CPU_FLAGS if f not in flags) or "-"
    load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    return [
        f"cpu: {name}, {os.cpu_count()} cpus",
        f"cpu flags: {have} (absent: {missing})",
        f"load average: {load}",
    ]


# -- FLOPs and probes -----------------------------------------------------------------------------------


def projection_shapes(model: Any) -> list[tuple[int, int]]:
    """(in_features, out_features) of every projection of the decoder (all layers), LoRA factors excluded."""
    import torch

    base = model.get_base_model() if hasattr(model, "get_base_model") else model
    # Plain nn.Linear only: PEFT's LoRA wrapper forwards `.weight` to its base layer (it would count twice).
    return [
        (m.in_features, m.out_features)
        for name, m in base.get_decoder().named_modules()
        if type(m) is torch.nn.Linear and "lora_" not in name
    ]


def step_flops(model: Any, sequences: list[Any]) -> float:
    """Useful FLOPs of one training step's forward + backward (formula in the module docstring)."""
    base = model.get_base_model() if hasattr(model, "get_base_model") else model
    cfg = base.config
    p_proj = sum(i * o for i, o in projection_shapes(model))
    p_lora = sum(p.numel() for n, p in base.named_parameters() if "lora_" in n)
    lengths = [len(s) - 1 for s in sequences]  # the model reads ids[:-1]
    n = sum(lengths)
    a = sum(s.num_assistant_tokens for s in sequences)
    d, layers, vocab = cfg.hidden_size, cfg.num_hidden_layers, cfg.vocab_size
    attention = 3 * 4 * d * layers * sum(t * (t + 1) / 2 for t in lengths)
    return float(4 * p_proj * n + 6 * p_lora * n + attention + 4 * d * vocab * a)


def time_op(fn: Any, min_seconds: float = 0.3) -> float:
    """Median seconds of `fn()` over enough calls to fill `min_seconds` (after one warm-up call)."""
    fn()
    times: list[float] = []
    start = time.perf_counter()
    while time.perf_counter() - start < min_seconds or len(times) < 3:
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def matmul_probes(model: Any, rows: int, dtype: Any) -> tuple[float, float]:
    """(projection probe, square probe) in FLOP/s, measured now (see module docstring)."""
    import torch
    import torch.nn.functional as F

    layer_shapes = sorted(set(projection_shapes(model)))
    seconds = flops = 0.0
    with torch.no_grad():
        for k, n in layer_shapes:
            x = torch.randn(rows, k, dtype=dtype)
            w = torch.randn(n, k, dtype=dtype)
            dy = torch.randn(rows, n, dtype=dtype)
            seconds += time_op(lambda x=x, w=w: F.linear(x, w))  # forward: x W^T
            seconds += time_op(lambda dy=dy, w=w: dy @ w)  # backward to the input: dy W
            flops += 2 * 2.0 * rows * k * n
        a = torch.randn(2048, 2048, dtype=dtype)
        b = torch.randn(2048, 2048, dtype=dtype)
        square = 2 * 2048.0**3 / time_op(lambda: a @ b)
    return flops / seconds, square


# -- our side -------------------------------------------------------------------------------------------


def ours_step(trainer: Any, groups: list[Any], spec: Any, step: int, ckpt_dir: Path) -> dict[str, float]:
    """One service-like step (train_step, release_if_short, save); its metrics, with trim_s, save_s, wall_s."""
    from art.kernels.allocator import release_if_short

    start, faults = time.perf_counter(), resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    report = trainer.train_step(groups, spec, current_step=step, progress=False)
    faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt - faults
    t = time.perf_counter()
    release_if_short()  # what the service does after a step: malloc_trim only when memory is short
    trim_s = time.perf_counter() - t
    t = time.perf_counter()
    trainer.save(ckpt_dir / f"{step + 1:04d}")
    save_s = time.perf_counter() - t
    return dict(
        report.metrics, trim_s=trim_s, save_s=save_s, wall_s=time.perf_counter() - start, page_faults=faults
    )


# -- TRL's side -----------------------------------------------------------------------------------------


def trl_batch(sequences: list[Any], pad_id: int) -> dict[str, Any]:
    """Our tokenised sequences as the dict TRL's `_generate_and_score_completions` returns.

    Prompt = tokens before the first sampled token (left-padded), completion = the rest (right-padded), its
    mask = our assistant mask, `old_per_token_logps` = the engine's sampled logprobs of the completion tokens.
    """
    import math

    import torch

    prompts, completions, masks, sampled = [], [], [], []
    for s in sequences:
        first = s.assistant_mask.index(True)
        prompts.append(s.token_ids[:first])
        completions.append(s.token_ids[first:])
        masks.append([int(m) for m in s.assistant_mask[first:]])
        sampled.append([0.0 if math.isnan(x) else x for x in s.sampled_logprobs[first:]])
    B, P, C = len(sequences), max(map(len, prompts)), max(map(len, completions))
    prompt_ids = torch.full((B, P), pad_id, dtype=torch.long)
    prompt_mask = torch.zeros((B, P), dtype=torch.long)
    completion_ids = torch.full((B, C), pad_id, dtype=torch.long)
    completion_mask = torch.zeros((B, C), dtype=torch.long)
    old_logps = torch.zeros((B, C), dtype=torch.float32)
    for b in range(B):
        p, c = len(prompts[b]), len(completions[b])
        prompt_ids[b, P - p :] = torch.tensor(prompts[b])
        prompt_mask[b, P - p :] = 1
        completion_ids[b, :c] = torch.tensor(completions[b])
        completion_mask[b, :c] = torch.tensor(masks[b])
        old_logps[b, :c] = torch.tensor(sampled[b])
    return {
        "prompt_ids": prompt_ids,
        "prompt_mask": prompt_mask,
        "completion_ids": completion_ids,
        "completion_mask": completion_mask,
        "advantages": torch.tensor([s.advantage for s in sequences], dtype=torch.float32),
        "num_items_in_batch": completion_mask.sum(),
        "old_per_token_logps": old_logps,
    }


def zero_reward(completions: list[Any], **kwargs: Any) -> list[float]:
    """Placeholder reward function: the patched generation step never calls it."""
    return [0.0] * len(completions)


def random_reward(completions: list[Any], **kwargs: Any) -> list[float]:
    """Reward for TRL's own generation step (any varying number will do for timing)."""
    import random

    return [random.random() for _ in completions]


def step_clock() -> Any:
    """HF Trainer callback: the seconds between consecutive `on_step_end` events (the first from train begin)."""
    from transformers import TrainerCallback

    class StepClock(TrainerCallback):  # type: ignore[misc]
        def __init__(self) -> None:
            self.last = 0.0
            self.seconds: list[float] = []

        def on_train_begin(self, *args: Any, **kwargs: Any) -> None:
            self.last = time.perf_counter()

        def on_step_end(self, *args: Any, **kwargs: Any) -> None:
            now = time.perf_counter()
            self.seconds.append(now - self.last)
            self.last = now

    return StepClock()


def make_trl_trainer(
    model: Any,
    tokenizer: Any,
    lora: Any,
    *,
    lr: float,
    batch_size: int,
    accumulation: int,
    num_generations: int,
    prompts: list[Any],
    steps: int,
    gradient_checkpointing: bool,
    bf16: bool,
    output_dir: str,
    reward: Any,
    max_completion_length: int = 32,
) -> Any:
    """A GRPOTrainer configured to match our trainer (see module docstring)."""
    import peft
    from datasets import Dataset
    from trl import GRPOConfig, GRPOTrainer

    config = GRPOConfig(
        output_dir=output_dir,
        learning_rate=lr,
        lr_scheduler_type="constant",
        adam_beta1=0.9,
        adam_beta2=0.99,
        weight_decay=0.1,
        max_grad_norm=1.0,
        optim="adamw_torch",
        loss_type="cispo",
        epsilon_high=5.0,  # TRL's CISPO clips the ratio at epsilon_high: ours at 1 + 4.0
        beta=0.0,
        temperature=1.0,
        num_generations=num_generations,
        max_completion_length=max_completion_length,
        per_device_train_batch_size=batch_size,
        gradient_accumulation_steps=accumulation,
        gradient_checkpointing=gradient_checkpointing,
        bf16=bf16,
        use_cpu=True,
        max_steps=steps,
        logging_steps=10**6,
        save_strategy="no",
        report_to="none",
        disable_tqdm=True,
        dataloader_num_workers=0,
        seed=0,
    )
    peft_config = None
    if not hasattr(model, "peft_config"):
        peft_config = peft.LoraConfig(
            r=lora.r,
            lora_alpha=lora.alpha,
            lora_dropout=lora.dropout,
            target_modules=list(lora.target_modules),
            bias="none",
            task_type="CAUSAL_LM",
        )
    from transformers.trainer_callback import PrinterCallback

    trainer = GRPOTrainer(
        model=model,
        reward_funcs=reward,
        args=config,
        train_dataset=Dataset.from_dict({"prompt": prompts}),
        processing_class=tokenizer,
        peft_config=peft_config,
    )
    trainer.remove_callback(PrinterCallback)  # its end-of-training summary dict is noise in our table
    return trainer


class TrlRunner:
    """TRL's own loop on our batch, one optimizer step per `step()` (a `train()` call with max_steps=1).

    Records per step: seconds (between `on_train_begin` and `on_step_end`), loss, grad norm before clipping,
    and the seconds of its training_step calls (prepare inputs + forward + loss + backward).
    """

    def __init__(self, trl_trainer: Any, batch: dict[str, Any]) -> None:
        self.trainer = trl_trainer
        self.seconds: list[float] = []
        self.losses: list[float] = []
        self.norms: list[float] = []
        self.fb: list[float] = []
        self._loss: list[float] = []
        self._fb: list[float] = []
        self.clock = step_clock()
        trl_trainer.add_callback(self.clock)
        trl_trainer.args.max_steps = 1
        compute_loss, clip, training_step = (
            trl_trainer.compute_loss,
            trl_trainer._clip_grad_norm,
            trl_trainer.training_step,
        )

        def generate(inputs: Any) -> dict[str, Any]:  # instead of sampling: our tokens, advantages, logprobs
            return {k: v.clone() for k, v in batch.items()}

        def compute_loss_recorded(*args: Any, **kwargs: Any) -> Any:
            loss = compute_loss(*args, **kwargs)
            self._loss.append(float(loss.detach()))
            return loss

        def training_step_timed(*args: Any, **kwargs: Any) -> Any:
            t = time.perf_counter()  # HF's training_step = _prepare_inputs + compute_loss + backward
            out = training_step(*args, **kwargs)
            self._fb.append(time.perf_counter() - t)
            return out

        def clip_recorded(model: Any) -> Any:  # once per optimizer step, after every micro-batch's backward
            norm = clip(model)
            self.norms.append(float(norm))
            self.losses.append(sum(self._loss))
            self.fb.append(sum(self._fb))
            self._loss.clear()
            self._fb.clear()
            return norm

        trl_trainer._generate_and_score_completions = generate
        trl_trainer.compute_loss = compute_loss_recorded
        trl_trainer.training_step = training_step_timed
        trl_trainer._clip_grad_norm = clip_recorded

    def step(self) -> float:
        self.trainer.train()
        self.seconds.append(self.clock.seconds[-1])
        return self.seconds[-1]


# -- main -----------------------------------------------------------------------------------------------


def median(xs: list[float]) -> float:
    return statistics.median(xs) if xs else float("nan")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--model", default="smollm2-135m", help="short name, local folder or Hugging Face id")
    parser.add_argument("--quick", action="store_true", help="tiny random model made on the spot, small step")
    parser.add_argument("--groups", type=int, default=2)
    parser.add_argument("--size", type=int, default=8, help="trajectories per group")
    parser.add_argument("--tokens", type=int, default=256, help="tokens per sequence (prompt + completion)")
    parser.add_argument("--prompt-tokens", type=int, default=64)
    parser.add_argument("--micro-batch-tokens", type=int, default=4096)
    parser.add_argument("--lr", type=float, default=1e-5)
    parser.add_argument("--dtype", default=None, help="bf16 / float32; default: what the service would pick")
    parser.add_argument("--warmup", type=int, default=1, help="steps not timed, per side")
    parser.add_argument(
        "--repeats", type=int, default=3, help="timed steps per side (the median is reported)"
    )
    parser.add_argument(
        "--trl-gc",
        choices=["both", "on", "off", "none"],
        default="both",
        help="TRL rows: with its default gradient checkpointing (on), without (off), both, or none (ours only)",
    )
    parser.add_argument("--gen-completions", type=int, default=4, help="TRL incl. generation: completions")
    parser.add_argument(
        "--gen-tokens", type=int, default=32, help="TRL incl. generation: tokens each (0: skip)"
    )
    parser.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's choice)")
    args = parser.parse_args(argv)

    import torch

    from art.base_model.loader import choose_dtype, load_model_and_tokenizer
    from art.chat.chat_template import ChatTemplate
    from art.training.batching import plan_micro_batches
    from art.training.prepare import prepare_step
    from art.training.trainer import Trainer
    from art.types import LoRAConfig, TrainSpec

    if args.threads:
        torch.set_num_threads(args.threads)
    tmp = tempfile.TemporaryDirectory(prefix="art-bench-train-")
    if args.quick:
        from art.testing.tiny_model import make_tiny_model

        args.model = str(make_tiny_model(Path(tmp.name) / "tiny"))
        args.groups, args.size, args.tokens, args.prompt_tokens = 2, 4, 96, 32
        args.micro_batch_tokens = min(args.micro_batch_tokens, 256)
        args.warmup, args.repeats = 1, 2
        args.trl_gc = "on"
        args.gen_tokens = min(args.gen_tokens, 8)

    dtype = choose_dtype(args.dtype)
    lora = LoRAConfig()
    print("\n".join(machine_summary()))
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, dtype {dtype}")
    try:
        import trl

        print(f"trl {trl.__version__}")
    except ImportError:
        print("trl is not installed: pip install 'trl>=1.16,<2' (part of the dev extra)")
        return 2

    model, tokenizer = load_model_and_tokenizer(args.model, dtype=dtype)
    chat_template = ChatTemplate(tokenizer)
    trainer = Trainer(model, chat_template, lora)
    initial_adapter = {k: v.detach().clone() for k, v in trainer.named_params}
    spec = TrainSpec(learning_rate=args.lr, micro_batch_tokens=args.micro_batch_tokens)
    groups = make_groups(
        tokenizer,
        chat_template,
        groups=args.groups,
        size=args.size,
        tokens=args.tokens,
        prompt_tokens=args.prompt_tokens,
        seed=0,
    )
    sequences = prepare_step(groups, trainer.tokenizer, spec, current_step=0).sequences
    plan = plan_micro_batches([len(s) for s in sequences], spec.micro_batch_tokens)
    rows = max(len(b) for b in plan)
    if len(sequences) % rows or any(len(b) != rows for b in plan):
        print(f"note: micro-batches of unequal rows {[len(b) for b in plan]}; TRL uses {rows} rows each")
    num_tokens = sum(len(s) - 1 for s in sequences)
    num_trained = sum(s.num_assistant_tokens for s in sequences)
    params = sum(p.numel() for p in model.parameters())
    print(
        f"model: {args.model} ({type(trainer.model.get_base_model()).__name__}, {params / 1e6:.1f}M params incl. "
        f"LoRA r={lora.r} alpha={lora.alpha} on {','.join(lora.target_modules)})"
    )
    print(
        f"data: {args.groups} groups x {args.size} = {len(sequences)} sequences, {num_tokens} tokens "
        f"({num_trained} trained), {len(plan)} micro-batch(es) of {rows} rows; loss cispo, lr {args.lr}; "
        f"{args.warmup} warm-up + {args.repeats} timed steps per side"
    )

    # ---- TRL trainers on our data (each its own copy of the model, starting from our initial adapter)
    batch = trl_batch(sequences, trainer.pad_id)
    variants = {"both": [True, False], "on": [True], "off": [False], "none": []}[args.trl_gc]
    runners: list[tuple[str, TrlRunner]] = []
    for gc_on in variants:
        trl_model, trl_tokenizer = load_model_and_tokenizer(args.model, dtype=dtype)
        trl_trainer = make_trl_trainer(
            trl_model,
            trl_tokenizer,
            lora,
            lr=args.lr,
            batch_size=rows,
            accumulation=len(plan),
            num_generations=args.size,
            prompts=[f"scenario {g}" for g in range(args.groups)],
            steps=1,
            gradient_checkpointing=gc_on,
            bf16=dtype == torch.bfloat16,
            output_dir=str(Path(tmp.name) / f"trl-{gc_on}"),
            reward=zero_reward,
        )
        with torch.no_grad():
            for name, param in trl_trainer.model.named_parameters():
                if name in initial_adapter:
                    param.copy_(initial_adapter[name])
        copied = sum(1 for n, _ in trl_trainer.model.named_parameters() if n in initial_adapter)
        if copied != len(initial_adapter):
            print(f"warning: copied {copied} of {len(initial_adapter)} LoRA tensors into TRL's model")
        runners.append(("TRL" if gc_on else "TRL, no grad. ckpt", TrlRunner(trl_trainer, batch)))

    # ---- interleaved rounds: ours, then each TRL variant, so that all sides share the machine's load alike
    ours: list[dict[str, float]] = []
    with tempfile.TemporaryDirectory(prefix="art-bench-ckpt-") as ckpt:
        for step in range(args.warmup + args.repeats):
            m = ours_step(trainer, groups, spec, step, Path(ckpt))
            ours.append(m)
            line = (
                f"  round {step}: ours {m['wall_s']:.2f} s (fwd+bwd {m['forward_s'] + m['backward_s']:.2f} s, "
                f"{m['page_faults'] / 1000:.0f}k page faults, loss {m['loss']:.5f}, grad norm {m['grad_norm']:.4f})"
            )
            for label, runner in runners:
                runner.step()
                line += f"; {label} {runner.seconds[-1]:.2f} s (loss {runner.losses[-1]:.5f})"
            print(line + ("  [warm-up]" if step < args.warmup else ""), flush=True)
    timed = ours[args.warmup :]
    ours_s = median([m["wall_s"] for m in timed])
    fb_s = median([m["forward_s"] + m["backward_s"] for m in timed])
    trl_rows = [
        (
            label,
            median(r.seconds[args.warmup :]),
            median(r.fb[args.warmup :]),
            r.losses[0],
            r.norms[0],
        )
        for label, r in runners
    ]
    trl_peft_model = runners[-1][1].trainer.model if runners else None

    # ---- probes, right after the steps, on the same threads
    print("matmul probes ...", flush=True)
    probe_rows = max(rows * (max(len(s) for s in sequences) - 1), 1)
    # Best of three: load only ever slows a probe, and a faster probe makes the target harder, not easier.
    probe_runs = [matmul_probes(trainer.model, probe_rows, dtype) for _ in range(3)]
    proj_rate, square_rate = max(r[0] for r in probe_runs), max(r[1] for r in probe_runs)
    print(
        "  projection probe runs: "
        + ", ".join(f"{r[0] / 1e9:.0f}" for r in probe_runs)
        + " GFLOP/s; square: "
        + ", ".join(f"{r[1] / 1e9:.0f}" for r in probe_runs)
        + " GFLOP/s",
        flush=True,
    )
    flops = step_flops(trainer.model, sequences)

    # ---- TRL incl. its own generation (extra information)
    gen_s = float("nan")
    if args.gen_tokens > 0 and trl_peft_model is not None:
        gen_trainer = make_trl_trainer(
            trl_peft_model,
            tokenizer,
            lora,
            lr=args.lr,
            batch_size=args.gen_completions,
            accumulation=1,
            num_generations=args.gen_completions,
            prompts=[[{"role": "user", "content": "What is 2 + 2? Answer briefly."}]],
            steps=args.warmup + args.repeats,
            gradient_checkpointing=variants[-1],
            bf16=dtype == torch.bfloat16,
            output_dir=str(Path(tmp.name) / "trl-gen"),
            reward=random_reward,
            max_completion_length=args.gen_tokens,
        )
        clock = step_clock()
        gen_trainer.add_callback(clock)
        print("TRL incl. generation:", flush=True)
        gen_trainer.train()
        for i, s in enumerate(clock.seconds):
            print(f"  step {i}: {s:.2f} s", flush=True)
        gen_s = median(clock.seconds[args.warmup :])

    # ---- the table
    first = ours[0]
    print()
    print(
        f"One GRPO step on {len(sequences)} sequences x ~{num_tokens // len(sequences)} tokens ({args.model})"
    )
    print(f"{'':<28}{'s/step':>9}{'fwd+bwd s':>11}{'vs ours':>9}{'step-1 loss':>13}{'grad norm':>11}")
    print(
        f"{'ours (Trainer.train_step)':<28}{ours_s:>9.2f}{fb_s:>11.2f}{1.0:>9.2f}"
        f"{first['loss']:>13.5f}{first['grad_norm']:>11.4f}"
    )
    for label, s, fb, loss, norm in trl_rows:
        print(f"{label:<28}{s:>9.2f}{fb:>11.2f}{s / ours_s:>9.2f}{loss:>13.5f}{norm:>11.4f}")
    if gen_s == gen_s:
        print(
            f"{'TRL incl. generation':<28}{gen_s:>9.2f}{'':>11}{'':>9}   (its own data: "
            f"{args.gen_completions} completions x {args.gen_tokens} tokens)"
        )
    print()
    if trl_rows:
        best_trl = min(trl_rows, key=lambda r: r[1])
        ratio = best_trl[1] / ours_s
        print(
            f"ratio: ours is {ratio:.2f}x faster than {best_trl[0]} (target >= 2x: {'met' if ratio >= 2 else 'NOT met'})"
        )

    rate = flops / fb_s
    share = rate / proj_rate
    print(
        f"matmul rate, training phase: {flops / 1e9:.1f} GFLOP useful / {fb_s:.2f} s = {rate / 1e9:.0f} GFLOP/s; "
        f"bf16 probes now: projections at M={probe_rows} {proj_rate / 1e9:.0f} GFLOP/s, "
        f"square 2048^3 {square_rate / 1e9:.0f} GFLOP/s"
    )
    print(
        f"  = {share:.0%} of the projection probe (target >= 50%: {'met' if share >= 0.5 else 'NOT met'}), "
        f"{rate / square_rate:.0%} of the square probe"
    )
    overhead = {
        "tokenize (advantages, tokenise, filter)": median([m["tokenize_s"] for m in timed]),
        "collate": median([m["collate_s"] for m in timed]),
        "clip + AdamW": median([m["optimizer_s"] for m in timed]),
        "release memory (malloc_trim if short)": median([m["trim_s"] for m in timed]),
        "checkpoint save": median([m["save_s"] for m in timed]),
    }
    # Per round (a median of differences, not a difference of medians: rounds drift by seconds).
    parts = ("tokenize_s", "collate_s", "optimizer_s", "trim_s", "save_s")
    other = median([m["wall_s"] - m["forward_s"] - m["backward_s"] - sum(m[k] for k in parts) for m in timed])
    total_overhead = median([m["wall_s"] - m["forward_s"] - m["backward_s"] for m in timed])
    overhead_share = median([(m["wall_s"] - m["forward_s"] - m["backward_s"]) / m["wall_s"] for m in timed])
    print(
        f"overhead of our step (neither forward nor backward): {total_overhead:.3f} s = "
        f"{overhead_share:.1%} of the step (target < 5%: {'met' if overhead_share < 0.05 else 'NOT met'})"
    )
    for name, s in [*overhead.items(), ("other (bookkeeping, loop)", other)]:
        print(f"  {name:<40}{s:>8.3f} s {s / ours_s:>7.1%}")
    print("  (adapter load into the engine and the canary are part of the service's step: measured there)")
    print(f"load average at the end: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    tmp.cleanup()
    return 0


if __name__ == "__main__":
    sys.exit(main())
