"""tinker-cookbook 0.6.1's basic recipes, unchanged, against `art serve` on the default model.

    python benchmarks/bench_tinker_cookbook.py            # sl_basic 8 steps, then rl_basic 8 steps
    python benchmarks/bench_tinker_cookbook.py --quick    # 3 + 2 steps (a smoke run of the plumbing)

What a Tinker user would run, with nothing of the cookbook changed: `python -m tinker_cookbook.recipes.sl_basic`
and `...rl_basic` with `TINKER_BASE_URL` / `TINKER_API_KEY` pointing at a local `art serve`, their options
given on the command line as the cookbook's README shows. tests/hub/test_tinker_cookbook.py runs the same two
recipes on a random tiny model (the plumbing); this script runs them on the default model (SmolLM2-135M
Instruct) to show that they learn:

- `sl_basic` on a conversations file of additions ("What is a + b?" -> "c", 8 per batch, a fresh batch
  each step): the mean NLL of each step's batch, which falls as the model learns to answer with the number;
- `rl_basic` with the cookbook's own `ArithmeticDatasetBuilder` (its addition environment, a + b in 0..100,
  one few-shot example; reward 1 for the right integer, a 0.1 format term) instead of GSM8K, which a 135M
  model cannot solve: 8 problems x 8 samples a step, `importance_sampling` loss, the mean reward per step.

The recipes accept only model names of the cookbook's table, so the server serves the default model as
`Qwen/Qwen3-4B-Instruct-2507` (`art serve --tinker-model NAME=PATH`; its chat format is ChatML like
SmolLM2's, so the cookbook's `qwen3_instruct` renderer renders SmolLM2's own template). The cookbook reads the
tokenizer of that name from a folder of that name in its working directory (SmolLM2's files are put there).
Nothing is downloaded. Last line: JSON (also written under `--out-dir`).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from datetime import date
from pathlib import Path
from typing import Any

COOKBOOK_MODEL = "Qwen/Qwen3-4B-Instruct-2507"
RENDERER = "qwen3_instruct"
START_TIMEOUT_S = 600


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def additions(count: int, seed: int) -> list[dict[str, Any]]:
    """`count` conversations "What is a + b?" -> "a+b" (a, b in 0..100), the same for a seed."""
    import random

    rng = random.Random(seed)
    rows = []
    for _ in range(count):
        a, b = rng.randint(0, 100), rng.randint(0, 100)
        rows.append(
            {
                "messages": [
                    {"role": "user", "content": f"What is {a} + {b}?"},
                    {"role": "assistant", "content": str(a + b)},
                ]
            }
        )
    return rows


def workdir(root: Path, model_path: Path, sl_rows: int) -> Path:
    """What the recipes read offline: the tokenizer under the cookbook's model name, the conversations."""
    tokenizer = root / COOKBOOK_MODEL
    tokenizer.mkdir(parents=True, exist_ok=True)
    for path in model_path.iterdir():
        if path.name.startswith("tokenizer") or path.name in (
            "special_tokens_map.json",
            "chat_template.jinja",
        ):
            shutil.copy(path, tokenizer / path.name)
    (root / "conversations.jsonl").write_text("".join(json.dumps(r) + "\n" for r in additions(sl_rows, 0)))
    return root


class Served:
    """`art serve` in a subprocess, serving the default model for the Tinker API under the cookbook's name."""

    def __init__(self, root: Path, model_path: Path) -> None:
        self.port = free_port()
        self.path = root / "serve"
        self.path.mkdir(parents=True, exist_ok=True)
        self.log = root / "serve.log"
        env = {**os.environ, "PYTHONUNBUFFERED": "1", "ART_BASE_MODEL_ROOTS": str(model_path.parent)}
        with open(self.log, "ab") as log:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "art", "serve", "--path", str(self.path), "--port", str(self.port),
                 "--device", "cpu", "--tinker-model", f"{COOKBOOK_MODEL}={model_path}"],
                stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True,
            )  # fmt: skip
        deadline = time.monotonic() + START_TIMEOUT_S
        pattern = re.compile(rf"ART serving at http://\S+:{self.port} ")
        while not pattern.search(self.log.read_text(errors="replace")):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise SystemExit(f"art serve did not start:\n{self.log.read_text(errors='replace')[-3000:]}")
            time.sleep(0.5)
        self.url = f"http://127.0.0.1:{self.port}"
        self.key = (self.path / ".serve" / "api_key").read_text().strip()

    def stop(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(120)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)


def recipe(served: Served, cwd: Path, name: str, *args: str) -> tuple[list[dict[str, Any]], float]:
    """`python -m tinker_cookbook.recipes.NAME ARGS` against the server: its metrics.jsonl rows and seconds."""
    env = {**os.environ, "TINKER_BASE_URL": served.url, "TINKER_API_KEY": served.key, "TINKER_TELEMETRY": "0",
           "HF_DATASETS_OFFLINE": "1"}  # fmt: skip
    log = cwd / "logs" / name
    start = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", f"tinker_cookbook.recipes.{name}", f"model_name={COOKBOOK_MODEL}",
         f"log_path={log}", *args],
        cwd=cwd, env=env, capture_output=True, text=True, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    seconds = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"{name} failed (exit {done.returncode}):\n{(done.stdout + done.stderr)[-4000:]}")
    return [json.loads(line) for line in (log / "metrics.jsonl").read_text().splitlines()], seconds


def main(args: argparse.Namespace) -> dict[str, Any]:
    from art.base_model.default_model import ensure_default_model

    model_path = ensure_default_model()
    root = Path(tempfile.mkdtemp(prefix="bench-cookbook-"))
    sl_steps, rl_steps = (3, 2) if args.quick else (args.sl_steps, args.rl_steps)
    cwd = workdir(root, model_path, sl_rows=sl_steps * 8)
    print(
        f"cpu: {platform.processor() or platform.machine()}, {os.cpu_count()} cpus; load {os.getloadavg()[0]:.2f}"
    )
    print(f"art serve with {model_path.name} as {COOKBOOK_MODEL} ...", flush=True)
    started = time.perf_counter()
    served = Served(root, model_path)
    print(f"serving after {time.perf_counter() - started:.0f} s", flush=True)
    try:
        common = "dataset_builder.common_config"
        sl_rows, sl_s = recipe(
            served, cwd, "sl_basic", f"learning_rate={args.sl_lr}", "eval_every=0", "lr_schedule=constant",
            "dataset_builder=tinker_cookbook.supervised.data:FromConversationFileBuilder",
            f"dataset_builder.file_path={cwd / 'conversations.jsonl'}",
            f"{common}.model_name_for_tokenizer={COOKBOOK_MODEL}", f"{common}.renderer_name={RENDERER}",
            f"{common}.batch_size=8", f"{common}.max_length=128", f"lora_rank={args.rank}",
        )  # fmt: skip
        nll = [round(float(r["train_mean_nll"]), 4) for r in sl_rows if "train_mean_nll" in r]
        print(f"sl_basic: {len(nll)} steps in {sl_s:.0f} s; train_mean_nll per step: {nll}", flush=True)
        rl_rows, rl_s = recipe(
            served, cwd, "rl_basic", f"max_steps={rl_steps}", "max_tokens=8", f"learning_rate={args.rl_lr}",
            f"lora_rank={args.rank}",
            "dataset_builder=tinker_cookbook.recipes.math_rl.arithmetic_env:ArithmeticDatasetBuilder",
            "dataset_builder.batch_size=8", "dataset_builder.group_size=8", f"dataset_builder.n_batches={rl_steps}",
            f"dataset_builder.model_name_for_tokenizer={COOKBOOK_MODEL}", f"dataset_builder.renderer_name={RENDERER}",
        )  # fmt: skip
        key = "env/all/reward/total"
        rewards = [round(float(r[key]), 4) for r in rl_rows if key in r]
        correct = [round(float(r["env/all/correct"]), 4) for r in rl_rows if "env/all/correct" in r]
        formatted = [round(float(r["env/all/format"]), 4) for r in rl_rows if "env/all/format" in r]
        print(f"rl_basic: {len(rewards)} steps in {rl_s:.0f} s; mean reward per step: {rewards}", flush=True)
        print(f"rl_basic: share correct per step: {correct}")
        print(f"rl_basic: share well formed (ended by the stop token) per step: {formatted}")
    finally:
        served.stop()
    half = max(1, len(rewards) // 2)
    summary = {
        "date": date.today().isoformat(),
        "model": model_path.name,
        "served_as": COOKBOOK_MODEL,
        "quick": args.quick,
        "sl_basic": {"steps": len(nll), "seconds": round(sl_s), "lr": args.sl_lr, "train_mean_nll": nll,
                     "first": nll[0] if nll else None, "last": nll[-1] if nll else None},
        "rl_basic": {"steps": len(rewards), "seconds": round(rl_s), "lr": args.rl_lr, "reward": rewards,
                     "correct": correct, "format": formatted, "first_half_mean": round(sum(rewards[:half]) / half, 4) if rewards else None,
                     "second_half_mean": round(sum(rewards[half:]) / max(1, len(rewards) - half), 4) if rewards else None},
    }  # fmt: skip
    if nll:
        print(
            f"sl_basic: NLL {nll[0]:.3f} -> {nll[-1]:.3f} ({'fell' if nll[-1] < nll[0] else 'did not fall'})"
        )
    if rewards:
        rl = summary["rl_basic"]
        print(
            f"rl_basic: mean reward, first half of the steps {rl['first_half_mean']:.3f}, second {rl['second_half_mean']:.3f}"
        )
    out = Path(args.out_dir)
    out.mkdir(parents=True, exist_ok=True)
    (out / f"bench_tinker_cookbook-{'quick' if args.quick else 'default'}-{summary['date']}.json").write_text(
        json.dumps(summary, indent=1) + "\n"
    )
    shutil.rmtree(root, ignore_errors=True)
    return summary


if __name__ == "__main__":
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    os.environ.setdefault("WANDB_MODE", "disabled")
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--quick", action="store_true", help="3 SL steps and 2 RL steps")
    parser.add_argument("--sl-steps", type=int, default=8)
    parser.add_argument("--rl-steps", type=int, default=8)
    parser.add_argument("--sl-lr", type=float, default=2e-4, help="sl_basic's own default")
    parser.add_argument("--rl-lr", type=float, default=2e-4)
    parser.add_argument("--rank", type=int, default=8, help="LoRA rank (the cookbook's default is 32)")
    parser.add_argument("--out-dir", default=str(Path(__file__).parent / "results"))
    parsed = parser.parse_args()
    for name, value in (
        ("--sl-steps", parsed.sl_steps),
        ("--rl-steps", parsed.rl_steps),
        ("--rank", parsed.rank),
    ):
        if value < 1:
            print(f"{name} must be >= 1, got {value}", file=sys.stderr)
            raise SystemExit(2)
    try:
        import tinker  # noqa: F401
        import tinker_cookbook  # noqa: F401
    except ImportError:
        print("tinker and tinker-cookbook are not importable: bash tests/install_extras.sh", file=sys.stderr)
        raise SystemExit(2) from None
    print(json.dumps(main(parsed)))
