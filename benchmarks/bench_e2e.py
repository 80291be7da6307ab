"""Time to target, end to end: ART's training loop vs TRL's `GRPOTrainer`, side by side on this machine.

    python benchmarks/bench_e2e.py                       # the adder, seeds 0 1 2, both arms, 4 min budget each
    python benchmarks/bench_e2e.py --quick               # one seed, 2 steps of 2 prompts per arm, low target (< 3 min)
    python benchmarks/bench_e2e.py --sweep               # pick each arm's learning rate (seed 0, each lr)
    python benchmarks/bench_e2e.py --lr-art 2e-4 --lr-trl 4e-4 --seeds 0 --budget-minutes 3

This module owns the end-to-end comparison: the task both arms learn, the held-out metric, the clock, the
runs (one fresh process per arm and seed), the table, the JSON results file and the plot. It reuses what
other modules own: the quickstart's adder (`examples/quickstart.py`: its prompt, few-shot turns and reward),
ART's model resolution and loader (`art.base_model.loader`) and `benchmarks/bench_train.py`'s GRPOTrainer
set-up (`make_trl_trainer`: the same LoRA adapter as ART's, CISPO loss, AdamW 0.9/0.99, weight decay 0.1,
clip 1.0, constant learning rate, no KL).

What both arms share: the base model (`--model`, default the embedded smollm2-135m), the task (the adder:
"What is a + b?" with two solved examples; reward 1 for the right sum, 0.2 less per unit off), the training
prompts of each seed in the same order, the group size (`num_generations`, 4), prompts per step (8), max
tokens (8), sampling temperature (1.0, full vocabulary) and one optimizer step per batch of
prompts x group size completions.

- ART arm: `LocalBackend` + `TrainableModel` + `model.train`, the README's loop (rollouts through the model's
  OpenAI-compatible client, one `model.train` per step).
- TRL arm: `GRPOTrainer.train()` with a reward function computing the same reward, its own HF `generate`
  rollouts, gradient checkpointing off (its faster setting on CPU, see bench_train.py) and a `TrainerCallback`
  that evaluates every `--eval-every` steps and stops the run at the target or the budget.

Held-out metric: the mean reward over a fixed set of held-out prompts (other numbers than any training
prompt's pair order; the same set for every run), `EVAL_SAMPLES` answers each sampled as in training
(temperature 1, full vocabulary) by the arm's current model: ART through its engine (`n=EVAL_SAMPLES`), TRL
with `model.generate(do_sample=True, top_k=0)` on the trainer's model. Sampled, not greedy: the base model's
greedy answers already score ~0.6 (the nearest number is often close), so a greedy target would be met
before any training; sampled, the base model scores ~0.33 and the target measures what GRPO optimises.
It is measured before the first step (step 0) and every `--eval-every` steps.

The clock: wall-clock seconds from the moment the arm's process is started (interpreter start, imports,
model load, compile, rollouts, training, checkpoints: everything) minus the time spent in held-out
evaluations (excluded). Minutes to target = the clock at the first evaluation whose metric reaches
`--target`. A run stops at the target (after at least `--min-steps` steps) or at the first step that ends past
`--budget-minutes`; a run that never reaches the target counts as the budget (marked "> budget").
The ratio per seed is TRL minutes / ART minutes; the summary is its median over seeds.

Learning rates: each arm uses its best from the same sweep (`--sweep`: seed 0, each rate of `--sweep-lrs`,
budget `--budget-minutes`; best = the shortest time to target, then the highest final metric). The defaults
below are the winners of the sweep recorded in benchmarks/results/ (see LR_WHY); the JSON file records the
rates used and why.

tic-tac-toe (`--task tic-tac-toe`): not timed here; the line it prints says why.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import json
import os
import random
import re
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, NoReturn

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("WANDB_MODE", "disabled")
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))  # bench_train (TRL's trainer set-up)
sys.path.insert(1, str(ROOT))  # examples.quickstart (the adder)

TASKS = ("adder",)
TRL_INSTALL = 'pip install "trl>=1.16,<2"'
TIC_TAC_TOE_FINDING = (
    "--task tic-tac-toe is not timed by this benchmark: TRL 1.16's GRPOTrainer has no built-in multi-turn "
    "game loop for a plain chat model (environment_factory plays turns only as tool calls, which needs a "
    "tool-calling chat template that smollm2-135m lacks; the alternative, the experimental rollout_func, "
    "leaves the whole game loop, HF generation and env_mask to the caller); accepted: --task adder"
)
SWEEP_LRS = (1e-4, 2e-4, 4e-4, 8e-4)
EVAL_SAMPLES = 4  # answers per held-out prompt
LR_ART = 4e-4
LR_TRL = 4e-4
LR_WHY = (
    "the sweep of 2026-11-29 (seed 0, budget 6 min, 2-core AMD EPYC with AVX2), minutes to 0.6 at 1e-4 / 2e-4 / "
    "4e-4 / 8e-4: ART 1.97 / 1.07 / 1.01 / 0.87, TRL 4.91 / 3.97 / 2.10 / > 6; ART's seed-0 best (8e-4) did not "
    "hold on seeds 1 and 2 (median of 3 seeds 1.15 min at 8e-4, 1.01 at 4e-4), so both arms use 4e-4 "
    "(results/bench_e2e-sweep-*amd-avx2-2026-11-29.*, bench_e2e-art-8e-4-seeds-1-2-*)"
)
QUICK = {"target": 0.3, "budget_minutes": 3.0, "seeds": [0], "groups_per_step": 2, "eval_prompts": 4}


# -- the task -------------------------------------------------------------------------------------------


def adder_messages(a: int, b: int) -> list[dict[str, str]]:
    """The quickstart's conversation for a + b: its system prompt, its two solved examples, the question."""
    from examples.quickstart import conversation

    return conversation(a, b)


def adder_score(a: int, b: int, reply: str) -> float:
    """The quickstart's reward (1 for the right sum, 0.2 less per unit off)."""
    from examples.quickstart import score

    return float(score(a, b, reply))


def pair_of(messages: Sequence[dict[str, str]]) -> tuple[int, int]:
    """(a, b) back from the last user turn of `adder_messages(a, b)`."""
    found = re.search(r"What is (\d+) \+ (\d+)\?", messages[-1]["content"])
    assert found, messages[-1]
    return int(found.group(1)), int(found.group(2))


def training_pairs(seed: int, count: int) -> list[tuple[int, int]]:
    """The training prompts of one seed, in order (both arms take them in this order)."""
    rng = random.Random(seed)
    return [(rng.randint(0, 9), rng.randint(0, 9)) for _ in range(count)]


def held_out_pairs(count: int) -> list[tuple[int, int]]:
    """The fixed held-out prompts (the same for every seed and arm)."""
    rng = random.Random(10_000)
    return [(rng.randint(0, 9), rng.randint(0, 9)) for _ in range(count)]


# -- one run (an arm and a seed, in its own process) --------------------------------------------------------


@dataclass
class RunSpec:
    """Everything one arm's run needs: passed to its process as JSON."""

    arm: str
    seed: int
    lr: float
    model: str
    target: float
    budget_minutes: float
    groups_per_step: int = 8
    num_generations: int = 4
    max_tokens: int = 8
    temperature: float = 1.0
    eval_prompts: int = 32
    eval_every: int = 1
    min_steps: int = 1
    max_steps: int = 1000
    t0: float = 0.0  # time.time() when the parent started this process
    work_dir: str = ""


@dataclass
class RunResult:
    """One run's evaluations, as (clock seconds, step, held-out metric), and its outcome."""

    arm: str
    seed: int
    lr: float
    points: list[tuple[float, int, float]] = field(default_factory=list)
    eval_seconds: float = 0.0
    error: str = ""

    def reached(self, target: float) -> tuple[float, int] | None:
        """(clock seconds, step) of the first evaluation at or above `target`, None if none."""
        return next(((t, s) for t, s, m in self.points if m >= target), None)

    def minutes(self, target: float, budget_minutes: float) -> float:
        hit = self.reached(target)
        return hit[0] / 60 if hit else budget_minutes


class Clock:
    """Seconds since the arm's process was started, evaluations excluded."""

    def __init__(self, t0: float) -> None:
        self.t0 = t0 or time.time()
        self.paused_s = 0.0

    def now(self) -> float:
        return time.time() - self.t0 - self.paused_s

    @contextmanager
    def paused(self) -> Iterator[None]:
        start = time.time()
        try:
            yield
        finally:
            self.paused_s += time.time() - start


class Progress:
    """Records the evaluations of a run and decides when it stops (target reached or budget spent)."""

    def __init__(self, spec: RunSpec) -> None:
        self.spec = spec
        self.clock = Clock(spec.t0)
        self.result = RunResult(arm=spec.arm, seed=spec.seed, lr=spec.lr)

    def record(self, step: int, metric: float) -> None:
        t = self.clock.now()
        self.result.points.append((round(t, 2), step, round(metric, 4)))
        self.result.eval_seconds = round(self.clock.paused_s, 2)
        print(
            f"[{self.spec.arm} seed {self.spec.seed} lr {self.spec.lr:g}] step {step}: clock {t / 60:.2f} min, "
            f"held-out reward {metric:.3f}",
            flush=True,
        )

    def should_stop(self, step: int) -> bool:
        if step >= self.spec.max_steps:
            return True
        if step < self.spec.min_steps:  # --quick: both arms train their steps, whatever the clock says
            return False
        reached = self.result.reached(self.spec.target) is not None
        return reached or self.clock.now() >= self.spec.budget_minutes * 60

    def should_eval(self, step: int) -> bool:
        return step % self.spec.eval_every == 0 or self.should_stop(step)


async def art_rollout(model: Any, spec: RunSpec, a: int, b: int) -> Any:
    """The quickstart's rollout with this benchmark's max tokens and temperature."""
    import art

    trajectory = art.Trajectory(messages_and_choices=adder_messages(a, b), reward=0.0)
    response = await model.openai_client().chat.completions.create(
        model=model.get_inference_name(),
        messages=trajectory.messages(),
        max_tokens=spec.max_tokens,
        temperature=spec.temperature,
    )
    choice = response.choices[0]
    trajectory.messages_and_choices.append(choice)
    trajectory.reward = adder_score(a, b, choice.message.content or "")
    return trajectory


async def art_held_out(model: Any, spec: RunSpec) -> float:
    """Mean reward of `EVAL_SAMPLES` sampled answers to each held-out prompt, from the model's current step."""
    client = model.openai_client()

    async def one(a: int, b: int) -> float:
        response = await client.chat.completions.create(
            model=model.get_inference_name(),
            messages=adder_messages(a, b),
            max_tokens=spec.max_tokens,
            temperature=1.0,
            n=EVAL_SAMPLES,
        )
        return statistics.fmean(adder_score(a, b, c.message.content or "") for c in response.choices)

    scores = await asyncio.gather(*(one(a, b) for a, b in held_out_pairs(spec.eval_prompts)))
    return statistics.fmean(scores)


async def run_art(spec: RunSpec, progress: Progress) -> None:
    """The README's loop: register, then rollouts and `model.train` per step until the target or budget."""
    import art
    from art.local import LocalBackend

    model = art.TrainableModel(
        name=f"adder-seed-{spec.seed}", project="bench-e2e", base_model=spec.model, base_path=spec.work_dir
    )
    backend = LocalBackend(progress=False)
    await model.register(backend)
    pairs = training_pairs(spec.seed, spec.groups_per_step * spec.max_steps)
    try:
        with progress.clock.paused():
            metric = await art_held_out(model, spec)
        progress.record(0, metric)
        step = 0
        while not progress.should_stop(step):
            batch = pairs[step * spec.groups_per_step : (step + 1) * spec.groups_per_step]
            groups = await art.gather_trajectory_groups(
                (
                    art.TrajectoryGroup(art_rollout(model, spec, a, b) for _ in range(spec.num_generations))
                    for a, b in batch
                ),
                pbar_desc=None,
            )
            await model.train(groups, config=art.TrainConfig(learning_rate=spec.lr))
            step += 1
            if progress.should_eval(step):
                with progress.clock.paused():
                    metric = await art_held_out(model, spec)
                progress.record(step, metric)
    finally:
        await backend.close()


def trl_held_out(model: Any, tokenizer: Any, spec: RunSpec) -> float:
    """Mean reward of `EVAL_SAMPLES` sampled answers (HF generate, temperature 1, full vocabulary) to each
    held-out prompt, from the trainer's model."""
    import torch

    pairs = held_out_pairs(spec.eval_prompts)
    texts = [
        tokenizer.apply_chat_template(adder_messages(a, b), tokenize=False, add_generation_prompt=True)
        for a, b in pairs
    ]
    side, tokenizer.padding_side = tokenizer.padding_side, "left"
    try:
        batch = tokenizer(texts, return_tensors="pt", padding=True, add_special_tokens=False)
    finally:
        tokenizer.padding_side = side
    was_training = model.training
    model.eval()
    with torch.no_grad():
        out = model.generate(
            **batch.to(model.device),
            max_new_tokens=spec.max_tokens,
            do_sample=True,
            temperature=1.0,
            top_k=0,
            top_p=1.0,
            num_return_sequences=EVAL_SAMPLES,
            pad_token_id=tokenizer.pad_token_id,
        )
    model.train(was_training)
    replies = tokenizer.batch_decode(out[:, batch["input_ids"].shape[1] :], skip_special_tokens=True)
    asked = [pair for pair in pairs for _ in range(EVAL_SAMPLES)]  # generate repeats each prompt in place
    return statistics.fmean(adder_score(a, b, r) for (a, b), r in zip(asked, replies, strict=True))


def adder_reward(prompts: list[Any], completions: list[Any], **kwargs: Any) -> list[float]:
    """TRL reward function: the quickstart's reward of each completion for its prompt's a + b."""
    rewards = []
    for prompt, completion in zip(prompts, completions, strict=True):
        a, b = pair_of(prompt)
        reply = completion[-1]["content"] if isinstance(completion, list) else str(completion)
        rewards.append(adder_score(a, b, reply))
    return rewards


def trl_callback(spec: RunSpec, progress: Progress, tokenizer: Any) -> Any:
    """A TrainerCallback: held-out evaluation (clock paused) at train begin and every `eval_every` steps,
    and the stop at the target or the budget."""
    from transformers import TrainerCallback

    class HeldOut(TrainerCallback):  # type: ignore[misc]
        def on_train_begin(self, args: Any, state: Any, control: Any, model: Any = None, **kw: Any) -> None:
            with progress.clock.paused():
                metric = trl_held_out(model, tokenizer, spec)
            progress.record(0, metric)

        def on_step_end(self, args: Any, state: Any, control: Any, model: Any = None, **kw: Any) -> Any:
            step = state.global_step
            if progress.should_eval(step):
                with progress.clock.paused():
                    metric = trl_held_out(model, tokenizer, spec)
                progress.record(step, metric)
            if progress.should_stop(step):
                control.should_training_stop = True
            return control

    return HeldOut()


def run_trl(spec: RunSpec, progress: Progress) -> None:
    """GRPOTrainer.train() on the same prompts, reward and sampling settings, until the target or budget."""
    import torch
    from bench_train import make_trl_trainer
    from transformers import set_seed

    from art.base_model.loader import choose_dtype, load_model_and_tokenizer
    from art.types import LoRAConfig

    set_seed(spec.seed)
    dtype = choose_dtype(None)
    model, tokenizer = load_model_and_tokenizer(spec.model, dtype=dtype)
    pairs = training_pairs(spec.seed, spec.groups_per_step * spec.max_steps)
    trainer = make_trl_trainer(
        model,
        tokenizer,
        LoRAConfig(),
        lr=spec.lr,
        batch_size=spec.groups_per_step * spec.num_generations,  # one optimizer step per batch, as ART
        accumulation=1,
        num_generations=spec.num_generations,
        prompts=[adder_messages(a, b) for a, b in pairs],
        steps=spec.max_steps,
        gradient_checkpointing=False,
        bf16=dtype == torch.bfloat16,
        output_dir=str(Path(spec.work_dir) / "trl"),
        reward=adder_reward,
        max_completion_length=spec.max_tokens,
    )
    trainer.args.seed = spec.seed
    trainer.args.temperature = spec.temperature
    trainer.shuffle_dataset = False  # the prompts in the seed's order, as the ART arm takes them
    trainer.add_callback(trl_callback(spec, progress, tokenizer))
    trainer.train()


def run_arm(spec_json: str, result_path: str) -> int:
    """The child process: run one arm, write its RunResult as JSON (the error too, if it failed)."""
    spec = RunSpec(**json.loads(spec_json))
    progress = Progress(spec)
    try:
        if spec.arm == "ART":
            asyncio.run(run_art(spec, progress))
        else:
            run_trl(spec, progress)
    except Exception as exc:  # reported by the parent, with the log's tail
        progress.result.error = f"{type(exc).__name__}: {exc}"
        raise
    finally:
        Path(result_path).write_text(json.dumps(asdict(progress.result)))
    return 0


# -- the parent: runs, table, files -----------------------------------------------------------------------


def spawn(spec: RunSpec, log_dir: Path) -> RunResult:
    """Run one arm in a fresh process (its clock starts here); its output lines pass through."""
    out = log_dir / f"{spec.arm}-seed{spec.seed}-lr{spec.lr:g}.json"
    log = log_dir / f"{spec.arm}-seed{spec.seed}-lr{spec.lr:g}.log"
    spec.t0 = time.time()
    command = [sys.executable, __file__, "--run-arm", json.dumps(asdict(spec)), "--run-result", str(out)]
    timeout = spec.budget_minutes * 120 + 600  # evaluations are off the clock: generous
    with log.open("w") as err:
        try:
            done = subprocess.run(command, stderr=err, timeout=timeout, env=os.environ.copy())
            rc = done.returncode
        except subprocess.TimeoutExpired:
            rc = -1
    if out.exists():
        result = RunResult(**json.loads(out.read_text()))
    else:
        result = RunResult(arm=spec.arm, seed=spec.seed, lr=spec.lr)
    if rc != 0:
        tail = log.read_text()[-3000:]
        result.error = result.error or f"exit {rc}"
        print(f"[{spec.arm} seed {spec.seed}] FAILED ({result.error}); log tail:\n{tail}", flush=True)
    return result


def host_kind() -> str:
    """avx512_bf16 / avx512f / avx2 / other, from lscpu's flags (/proc/cpuinfo if lscpu is missing)."""
    try:
        text = subprocess.run(["lscpu"], capture_output=True, text=True, timeout=10).stdout
    except (OSError, subprocess.SubprocessError):
        text = ""
    if "Flags" not in text:
        try:
            text = Path("/proc/cpuinfo").read_text()
        except OSError:
            text = ""
    flags = set(text.split())
    return next((k for k in ("avx512_bf16", "avx512f", "avx2") if k in flags), "other")


def fmt_minutes(result: RunResult, args: argparse.Namespace) -> str:
    if result.error:
        return "failed"
    hit = result.reached(args.target)
    return f"{hit[0] / 60:.2f}" if hit else f">{args.budget_minutes:g} (budget)"


def last(result: RunResult) -> tuple[int, float]:
    """(last step, final metric) of a run."""
    return (result.points[-1][1], result.points[-1][2]) if result.points else (0, float("nan"))


def print_table(pairs: list[tuple[RunResult, RunResult]], args: argparse.Namespace) -> float:
    """Per seed: minutes to target, steps, final metric of both arms and the ratio; returns the median ratio."""
    head = (
        f"{'seed':>4} | {'ART min':>14} {'steps':>5} {'final':>6} | {'TRL min':>14} {'steps':>5} "
        f"{'final':>6} | {'TRL/ART':>7}"
    )
    print(head)
    print("-" * len(head))
    ratios = []
    for art_run, trl_run in pairs:
        cells = []
        for run in (art_run, trl_run):
            hit = run.reached(args.target)
            steps = hit[1] if hit else last(run)[0]
            cells.append(f"{fmt_minutes(run, args):>14} {steps:>5} {last(run)[1]:>6.3f}")
        ok = not art_run.error and not trl_run.error
        ratio = (
            trl_run.minutes(args.target, args.budget_minutes)
            / art_run.minutes(args.target, args.budget_minutes)
            if ok
            else float("nan")
        )
        if ok:
            ratios.append(ratio)
        print(f"{art_run.seed:>4} | {cells[0]} | {cells[1]} | {ratio:>7.2f}")
    median = statistics.median(ratios) if ratios else float("nan")
    print(
        f"median TRL/ART time to target: {median:.2f} (minutes: clock from process start, held-out "
        f"evaluations excluded; steps: at the target, or the last step)"
    )
    return median


def save_plot(pairs: list[tuple[RunResult, RunResult]], args: argparse.Namespace, path: Path) -> None:
    """Held-out metric vs clock minutes, ART solid and TRL dashed, one colour per seed, the target line."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4), dpi=120)
    for i, (art_run, trl_run) in enumerate(pairs):
        for run, style in ((art_run, "-"), (trl_run, "--")):
            xs = [t / 60 for t, _, _ in run.points]
            ys = [m for _, _, m in run.points]
            ax.plot(xs, ys, style, marker="o", ms=3, color=f"C{i}", label=f"{run.arm} seed {run.seed}")
    ax.axhline(args.target, color="grey", lw=0.8, ls=":", label=f"target {args.target:g}")
    ax.set_xlabel("minutes since process start (held-out evaluations excluded)")
    ax.set_ylabel("held-out mean reward (sampled, temperature 1)")
    ax.set_title(f"{args.task}: ART vs TRL GRPOTrainer ({args.model})")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def spec_for(arm: str, seed: int, lr: float, args: argparse.Namespace, work: Path) -> RunSpec:
    spec = RunSpec(
        arm=arm,
        seed=seed,
        lr=lr,
        model=args.model,
        target=args.target,
        budget_minutes=args.budget_minutes,
        groups_per_step=args.groups_per_step,
        eval_prompts=args.eval_prompts,
        eval_every=args.eval_every,
        work_dir=str(work / f"{arm}-{seed}-{lr:g}"),
    )
    if args.quick:  # both arms train for real, two steps each, whatever the metric does
        spec.min_steps = spec.max_steps = 2
    return spec


def write_results(payload: dict[str, Any], args: argparse.Namespace, stem: str) -> tuple[Path, Path]:
    out_dir = Path(args.out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    json_path, png_path = out_dir / f"{stem}.json", out_dir / f"{stem}.png"
    json_path.write_text(json.dumps(payload, indent=1) + "\n")
    return json_path, png_path


def run_sweep(args: argparse.Namespace, work: Path, header: dict[str, Any]) -> int:
    """Each arm at each rate of `--sweep-lrs` (first seed), the best rate per arm, the results file."""
    runs: dict[str, list[RunResult]] = {"ART": [], "TRL": []}
    for lr in args.sweep_lrs:
        for arm in ("ART", "TRL"):
            runs[arm].append(spawn(spec_for(arm, args.seeds[0], lr, args, work), work))
    best = {}
    for arm, results in runs.items():
        ok = [r for r in results if not r.error] or results
        pick = min(ok, key=lambda r: (r.minutes(args.target, args.budget_minutes), -last(r)[1]))
        best[arm] = pick.lr
        for r in results:
            print(
                f"sweep {arm} lr {r.lr:g}: {fmt_minutes(r, args)} min to {args.target:g}, final {last(r)[1]:.3f}"
                + ("  <- best" if r is pick else "")
            )
    print(f"best: --lr-art {best['ART']:g} --lr-trl {best['TRL']:g}")
    stem = f"bench_e2e-sweep-{header['host']}-{header['date']}"
    payload = {**header, "best": best, "runs": {a: [asdict(r) for r in rs] for a, rs in runs.items()}}
    json_path, _ = write_results(payload, args, stem)
    print(f"results: {json_path}")
    return 0 if all(not r.error for rs in runs.values() for r in rs) else 1


def run_benchmark(args: argparse.Namespace, work: Path, header: dict[str, Any]) -> int:
    pairs: list[tuple[RunResult, RunResult]] = []
    for seed in args.seeds:
        art_run = spawn(spec_for("ART", seed, args.lr_art, args, work), work)
        trl_run = spawn(spec_for("TRL", seed, args.lr_trl, args, work), work)
        pairs.append((art_run, trl_run))
    print()
    median = print_table(pairs, args)
    mode = "quick" if args.quick else "default"
    stem = f"bench_e2e-{args.task}-{mode}-{header['host']}-{header['date']}"
    payload = {
        **header,
        "median_ratio_trl_over_art": median,
        "runs": [{"ART": asdict(a), "TRL": asdict(t)} for a, t in pairs],
    }
    json_path, png_path = write_results(payload, args, stem)
    save_plot(pairs, args, png_path)
    print(f"results: {json_path}\nplot: {png_path}")
    return 0 if all(not r.error for p in pairs for r in p) else 1


# -- arguments --------------------------------------------------------------------------------------------


class OneLineParser(argparse.ArgumentParser):
    """argparse, but a bad argument is one line (what is accepted) and exit 2, without the usage block."""

    def error(self, message: str) -> NoReturn:
        print(f"bench_e2e.py: {message}", file=sys.stderr)
        sys.exit(2)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = OneLineParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--task", default="adder", help="adder (tic-tac-toe: prints why it is not timed)")
    parser.add_argument("--model", default="smollm2-135m", help="short name, local folder or Hugging Face id")
    parser.add_argument("--seeds", type=int, nargs="+", default=None, help="default: 0 1 2 (--quick: 0)")
    parser.add_argument("--target", type=float, default=None, help="held-out mean reward (default 0.6)")
    parser.add_argument("--budget-minutes", type=float, default=None, help="per run (default 4)")
    parser.add_argument("--lr-art", type=float, default=LR_ART)
    parser.add_argument("--lr-trl", type=float, default=LR_TRL)
    parser.add_argument("--sweep", action="store_true", help="run each arm at each --sweep-lrs rate instead")
    parser.add_argument("--sweep-lrs", type=float, nargs="+", default=list(SWEEP_LRS))
    parser.add_argument("--groups-per-step", type=int, default=None, help="prompts per step (default 8)")
    parser.add_argument("--eval-prompts", type=int, default=None, help="held-out prompts (default 32)")
    parser.add_argument("--eval-every", type=int, default=1, help="steps between held-out evaluations")
    parser.add_argument("--quick", action="store_true", help="one seed, 2 steps per arm, target 0.3")
    parser.add_argument("--out-dir", default=str(HERE / "results"))
    parser.add_argument("--run-arm", help=argparse.SUPPRESS)
    parser.add_argument("--run-result", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    defaults = QUICK if args.quick else {"target": 0.6, "budget_minutes": 4.0, "seeds": [0, 1, 2]}
    defaults = {"groups_per_step": 8, "eval_prompts": 32, **defaults}
    for key, value in defaults.items():
        if getattr(args, key) is None:
            setattr(args, key, value)
    return args


def check_args(args: argparse.Namespace) -> str | None:
    """The one-line refusal of an argument this benchmark cannot use, None when all are usable."""
    if args.task == "tic-tac-toe":
        return TIC_TAC_TOE_FINDING
    if args.task not in TASKS:
        return (
            f"--task {args.task!r}: accepted values: adder (tic-tac-toe is explained by --task tic-tac-toe)"
        )
    if not 0 < args.target <= 1:
        return f"--target {args.target:g}: accepted values: a held-out mean reward in (0, 1], e.g. 0.6"
    if not 0 < args.budget_minutes < 24 * 60:
        return f"--budget-minutes {args.budget_minutes:g}: accepted values: minutes per run, > 0 and < 1440"
    lrs = [args.lr_art, args.lr_trl, *args.sweep_lrs]
    if (
        any(not 0 < lr < 1 for lr in lrs)
        or args.eval_every < 1
        or args.groups_per_step < 1
        or args.eval_prompts < 1
    ):
        return "learning rates must be in (0, 1); --eval-every, --groups-per-step, --eval-prompts >= 1"
    return None


def trl_missing() -> str | None:
    """The install line when TRL (>= 1.16) cannot be imported, None when it can."""
    try:
        import trl
    except Exception:
        return f"TRL is not importable: {TRL_INSTALL}"
    major_minor = tuple(int(x) for x in re.findall(r"\d+", trl.__version__)[:2])
    if major_minor < (1, 16):
        return f"TRL {trl.__version__} is too old: {TRL_INSTALL}"
    return None


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.run_arm:
        return run_arm(args.run_arm, args.run_result)
    refusal = check_args(args) or trl_missing()
    if refusal:
        print(refusal)
        return 2
    from bench_train import machine_summary

    header = {
        "host": host_kind(),
        "date": datetime.date.today().isoformat(),
        "command": shlex.join([sys.executable, *sys.argv]) if argv is None else shlex.join(argv),
        "machine": machine_summary(),
        "task": args.task,
        "model": args.model,
        "target": args.target,
        "budget_minutes": args.budget_minutes,
        "seeds": args.seeds,
        "settings": {"groups_per_step": args.groups_per_step, "num_generations": 4, "max_tokens": 8,
                     "temperature": 1.0, "eval_prompts": args.eval_prompts, "eval_every": args.eval_every,
                     "held_out": f"{EVAL_SAMPLES} sampled answers per prompt (temperature 1)", "clock": "from process start; evaluations excluded"},
        "lr": {"ART": args.lr_art, "TRL": args.lr_trl, "sweep": list(args.sweep_lrs),
               "why": LR_WHY if (args.lr_art, args.lr_trl) == (LR_ART, LR_TRL) else "given on the command line"},
    }  # fmt: skip
    print("\n".join(header["machine"]))
    print(
        f"task {args.task}, model {args.model}, target {args.target:g}, budget {args.budget_minutes:g} min/run"
    )
    with tempfile.TemporaryDirectory(prefix="art-bench-e2e-") as tmp:
        work = Path(tmp)
        if args.sweep:
            return run_sweep(args, work, header)
        return run_benchmark(args, work, header)


if __name__ == "__main__":
    sys.exit(main())
