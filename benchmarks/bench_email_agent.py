"""Email agent rollouts (issue 56 item 6): how many a minute, and where their wall time goes: tools or the model.

    python benchmarks/bench_email_agent.py            # the default model, train.py's default task and step
    python benchmarks/bench_email_agent.py --quick    # a tiny random model made on the spot, a small inbox (< 60 s)
    python benchmarks/bench_email_agent.py --out-dir benchmarks/results   # also write the JSON results

What runs is the example's own code (`art.examples.email_agent`): the inbox of `EmailAgentConfig()`'s seed
and size, built in memory; the model registered with `LocalBackend` (the embedded SmolLM2-135M by default);
`rollout.rollout` with the config's task (`TaskConfig`: turns, tokens, scaffolding) and training
temperature, through the model's OpenAI client, as train.py's RL steps call it. Two rows:

- one at a time: `--sequential` rollouts, each awaited before the next (what one episode costs alone);
- a step's rollouts at once: `--groups` questions x `--group-size` rollouts each, gathered as train.py
  gathers a step's groups (the engine batches them);
- and, before the model loads, the tools alone: the scripted expert's calls (search, read the sources,
  answer) on `--expert-questions` questions, what a rollout that uses the tools as intended spends in them
  (a base model that calls few tools spends next to nothing there).

Each row times, besides its wall time: every `chat.completions.create` call (the model: the request, the
server, prefill and decoding, the response), every tool call (`run_tool`: SQLite FTS5 search, read, answer
check; the prefilled calls of a scaffold included) and every episode from start to end. Shares:

- model and tools as shares of the episodes' summed time (the rest, "other", is the client's own work:
  building the messages, the event loop's turns between awaits);
- tools as a share of the row's wall time: tool calls are synchronous, so that is exactly how long they held
  the event loop (the engine keeps decoding on its own thread meanwhile).

Rollouts per minute = rollouts / wall time x 60. Registration and `--warmup` untimed rollouts (the engine's
first requests; 1, none with --quick) come before the rows. The machine is shared: absolute times drift 20-40% with the load; the
shares move less.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import json
import statistics
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from types import SimpleNamespace
from typing import Any, NoReturn

import art


@dataclass
class Clock:
    """What one row's rollouts spent, summed over its rollouts."""

    model_s: float = 0.0
    model_calls: int = 0
    completion_tokens: int = 0
    tool_s: float = 0.0
    tool_calls: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    tool_s_by_name: dict[str, float] = field(default_factory=lambda: defaultdict(float))
    episode_s: list[float] = field(default_factory=list)


@dataclass
class Row:
    name: str
    rollouts: int
    wall_s: float
    rollouts_per_min: float
    model_share: float  # of the episodes' summed time
    tool_share: float  # of the episodes' summed time
    other_share: float
    tool_wall_share: float  # of the row's wall time (tool calls hold the event loop)
    model_calls: int
    ms_per_model_call: float
    completion_tokens_per_s: float
    tool_calls: dict[str, int]
    ms_per_tool_call: dict[str, float]
    median_episode_s: float
    correct: float
    median_tool_calls: float


class TimedClient:
    """The parts of `openai.AsyncOpenAI` a rollout uses, timing each `chat.completions.create` into `clock`."""

    def __init__(self, client: Any) -> None:
        self.client = client
        self.clock = Clock()
        self.chat = SimpleNamespace(completions=SimpleNamespace(create=self._create))

    async def _create(self, **kwargs: Any) -> Any:
        start = time.perf_counter()
        response = await self.client.chat.completions.create(**kwargs)
        self.clock.model_s += time.perf_counter() - start
        self.clock.model_calls += 1
        self.clock.completion_tokens += response.usage.completion_tokens if response.usage else 0
        return response


def time_tools(timed: TimedClient) -> None:
    """Make the rollout module's `run_tool` add each call's time to `timed.clock` (the one being measured)."""
    import art.examples.email_agent.rollout as rollout_module

    original = getattr(rollout_module.run_tool, "original", rollout_module.run_tool)

    def run_tool(inbox: Any, mailbox: str, name: str, arguments: str, max_results: int) -> Any:
        start = time.perf_counter()
        try:
            return original(inbox, mailbox, name, arguments, max_results)
        finally:
            took = time.perf_counter() - start
            timed.clock.tool_s += took
            timed.clock.tool_calls[name] += 1
            timed.clock.tool_s_by_name[name] += took

    run_tool.original = original  # type: ignore[attr-defined]
    rollout_module.run_tool = run_tool  # type: ignore[assignment]


async def timed_rollout(timed: TimedClient, model_name: str, inbox: Any, question: Any, config: Any) -> Any:
    from art.examples.email_agent.rollout import rollout

    start = time.perf_counter()
    trajectory = await rollout(
        timed, model_name, inbox, question, config=config.task, temperature=config.temperature
    )  # type: ignore[arg-type]
    timed.clock.episode_s.append(time.perf_counter() - start)
    return trajectory


def make_row(name: str, timed: TimedClient, wall_s: float, trajectories: list[Any]) -> Row:
    c = timed.clock
    episodes = sum(c.episode_s) or 1e-9
    n = len(trajectories)
    return Row(
        name=name,
        rollouts=n,
        wall_s=wall_s,
        rollouts_per_min=n / wall_s * 60,
        model_share=c.model_s / episodes,
        tool_share=c.tool_s / episodes,
        other_share=max(0.0, 1 - (c.model_s + c.tool_s) / episodes),
        tool_wall_share=c.tool_s / wall_s,
        model_calls=c.model_calls,
        ms_per_model_call=c.model_s / max(c.model_calls, 1) * 1000,
        completion_tokens_per_s=c.completion_tokens / wall_s,
        tool_calls=dict(c.tool_calls),
        ms_per_tool_call={k: c.tool_s_by_name[k] / v * 1000 for k, v in c.tool_calls.items()},
        median_episode_s=statistics.median(c.episode_s),
        correct=sum(float(t.metrics.get("correct", 0)) for t in trajectories) / max(n, 1),
        median_tool_calls=statistics.median([float(t.metrics.get("tool_calls", 0)) for t in trajectories]),
    )


def expert_tools(inbox: Any, config: Any, n: int) -> dict[str, Any]:
    """The tools alone, without a model: every call of the scripted expert's episodes (`expert_messages`:
    search, read each source, answer) on the first `n` training questions, timed as the rows time them.
    What a rollout that uses the tools as intended spends in them, whatever the model under test does."""
    from art.examples.email_agent.rollout import expert_messages

    timed = TimedClient(None)
    time_tools(timed)
    questions = inbox.questions("train")[:n]
    for q in questions:
        expert_messages(inbox, q, config.task)
    c = timed.clock
    return {
        "episodes": len(questions),
        "calls": dict(c.tool_calls),
        "ms_per_call": {k: c.tool_s_by_name[k] / v * 1000 for k, v in c.tool_calls.items()},
        "ms_per_episode": c.tool_s / max(len(questions), 1) * 1000,
    }


def format_expert(e: dict[str, Any]) -> str:
    per_call = ", ".join(f"{k} {v:.3f} ms" for k, v in e["ms_per_call"].items())
    calls = sum(e["calls"].values()) / max(e["episodes"], 1)
    return (
        f"tools alone (the scripted expert's calls, {e['episodes']} questions, {calls:.2f} calls each): "
        f"{per_call}; {e['ms_per_episode']:.2f} ms per episode"
    )


async def run_rows(model: art.TrainableModel, inbox: Any, config: Any, args: argparse.Namespace) -> list[Row]:
    """The untimed warm-up, then the two rows (see the module docstring)."""
    questions = inbox.questions("train")
    name = model.get_inference_name()
    warm = TimedClient(model.openai_client())
    time_tools(warm)
    for q in questions[len(questions) - args.warmup :] if args.warmup else []:  # untimed
        await timed_rollout(warm, name, inbox, q, config)
        print(f"warm-up rollout: {warm.clock.episode_s[-1]:.1f} s (not counted)", flush=True)
    rows = []
    sequential = TimedClient(model.openai_client())
    time_tools(sequential)
    start, done = time.perf_counter(), []
    for q in questions[: args.sequential]:
        done.append(await timed_rollout(sequential, name, inbox, q, config))
        print(f"  rollout {len(done)}: {sequential.clock.episode_s[-1]:.1f} s", flush=True)
    rows.append(make_row("one at a time", sequential, time.perf_counter() - start, done))
    print(format_rows(rows[-1:]), flush=True)
    batch = TimedClient(model.openai_client())
    time_tools(batch)
    start = time.perf_counter()
    groups = await art.gather_trajectory_groups(
        (
            art.TrajectoryGroup(timed_rollout(batch, name, inbox, q, config) for _ in range(args.group_size))
            for q in questions[args.sequential : args.sequential + args.groups]
        ),
        pbar_desc="a step's rollouts",
        pbar_leave=False,
        max_exceptions=0,
    )
    flat = [t for g in groups for t in g.trajectories]
    step = f"a step's at once ({args.groups}x{args.group_size})"
    rows.append(make_row(step, batch, time.perf_counter() - start, flat))
    print(format_rows(rows[-1:]), flush=True)
    return rows


def format_rows(rows: list[Row]) -> str:
    header = (
        f"{'rollouts':<28} {'n':>3} {'wall s':>7} {'per min':>8} {'model':>6} {'tools':>6} {'other':>6} "
        f"{'tools/wall':>10} {'ms/call':>8} {'ms/tool':>8} {'tok/s':>6} {'correct':>8} {'calls':>5}"
    )
    lines = [header, "-" * len(header)]
    for r in rows:
        tool_ms = sum(r.ms_per_tool_call[k] * v for k, v in r.tool_calls.items()) / max(
            sum(r.tool_calls.values()), 1
        )
        lines.append(
            f"{r.name:<28} {r.rollouts:>3} {r.wall_s:>7.1f} {r.rollouts_per_min:>8.2f} {r.model_share:>6.1%} "
            f"{r.tool_share:>6.2%} {r.other_share:>6.1%} {r.tool_wall_share:>10.3%} {r.ms_per_model_call:>8.0f} "
            f"{tool_ms:>8.2f} {r.completion_tokens_per_s:>6.1f} {r.correct:>8.1%} {r.median_tool_calls:>5g}"
        )
    return "\n".join(lines)


LEGEND = (
    "model / tools / other: shares of the episodes' summed time (awaiting chat.completions.create; inside\n"
    "run_tool; the rest). tools/wall: tool time over the row's wall time (tool calls block the event loop).\n"
    "ms/call: mean per model request; ms/tool: mean per tool call; tok/s: completion tokens over wall time;\n"
    "correct: right final answers; calls: median tool calls the model made per rollout (malformed included)."
)


def host_kind() -> str:
    """lscpu's model name and the flags that decide the engine's dtype (avx512_bf16, amx_bf16, ...)."""
    try:
        text = subprocess.run(["lscpu"], capture_output=True, text=True, timeout=10).stdout
    except (OSError, subprocess.SubprocessError):
        return "unknown (no lscpu)"
    info = dict(line.split(":", 1) for line in text.splitlines() if ":" in line)
    flags = set(info.get("Flags", "").split())
    wanted = [f for f in ("avx2", "avx512f", "avx512_bf16", "amx_bf16") if f in flags]
    cpus = info.get("CPU(s)", "?").strip()
    return f"{info.get('Model name', '?').strip()}, {cpus} CPUs, {' '.join(wanted) or 'no avx2'}"


class _Parser(argparse.ArgumentParser):
    """Argument errors in one line, exit status 2."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"bench_email_agent.py: error: {message}\n")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = _Parser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="a tiny random model and a small inbox")
    parser.add_argument("--model", default=None, help="base model (default: train.py's, smollm2-135m)")
    parser.add_argument("--sequential", type=int, default=None, help="rollouts one at a time (default 4)")
    parser.add_argument("--groups", type=int, default=None, help="questions at once (default: train.py's)")
    parser.add_argument("--group-size", type=int, default=None, help="rollouts per question (train.py's)")
    parser.add_argument(
        "--warmup", type=int, default=None, help="untimed rollouts first (default 1; 0 --quick)"
    )
    parser.add_argument("--expert-questions", type=int, default=200, help="questions for the tools alone")
    parser.add_argument("--out-dir", default=None, help="write bench_email_agent-*.json here")
    args = parser.parse_args(argv)
    if args.warmup is not None and args.warmup < 0:
        parser.error(f"--warmup: must be 0 or more, got {args.warmup}")
    for flag in ("sequential", "groups", "group_size", "expert_questions"):
        value = getattr(args, flag)
        if value is not None and value < 1:
            parser.error(f"--{flag.replace('_', '-')}: must be at least 1, got {value}")
    if args.out_dir is not None and Path(args.out_dir).is_file():
        parser.error(f"--out-dir: {args.out_dir} is a file, not a folder")
    return args


def bench_config(args: argparse.Namespace, tmp: str) -> Any:
    """train.py's default config (the task, temperature, step shape), or its quick one on a tiny model."""
    from art.examples.email_agent.rollout import TaskConfig
    from art.examples.email_agent.train import EmailAgentConfig

    if args.quick:
        from art.testing.tiny_model import make_tiny_model

        base = args.model or str(make_tiny_model(Path(tmp) / "tiny"))
        # the tiny model's context is 2,048 tokens (of ~3 characters): no worked example, one hit, one turn;
        # and the rollout's own search and read first (a scaffold), so that the tools run whatever it writes
        task = TaskConfig(
            few_shot=False, max_results=1, max_turns=1, max_tokens=16, prefill_search=True, prefill_read=True
        )
        config = EmailAgentConfig.quick(base_model=base, task=task)
        args.sequential, args.groups = args.sequential or 1, args.groups or 1
        args.group_size = args.group_size or 2
        args.warmup = args.warmup or 0
    else:
        config = EmailAgentConfig()
        config = replace(config, base_model=args.model or config.base_model)
        args.sequential, args.groups = args.sequential or 4, args.groups or config.groups_per_step
        args.group_size = args.group_size or config.group_size
        args.warmup = 1 if args.warmup is None else args.warmup
    return replace(config, base_path=str(Path(tmp) / "record"), name="bench")


async def main_async(args: argparse.Namespace) -> int:
    from art.examples.email_agent.inbox import EmailAgentInputError
    from art.examples.email_agent.train import load_inbox

    from art.local import LocalBackend

    with tempfile.TemporaryDirectory(prefix="bench-email-") as tmp:
        config = bench_config(args, tmp)
        t = time.perf_counter()
        try:
            inbox = load_inbox(config)
        except EmailAgentInputError as exc:
            print(f"bench_email_agent.py: error: {exc}", file=sys.stderr)
            return 2
        built_s = time.perf_counter() - t
        needed = args.sequential + args.groups
        if len(inbox.questions("train")) < needed + 1:
            print(
                f"bench_email_agent.py: error: the inbox has too few training questions for {needed}",
                file=sys.stderr,
            )
            return 2
        host, when = host_kind(), datetime.datetime.now(datetime.UTC)
        print(f"host: {host}; {when:%Y-%m-%d %H:%M} UTC; model {config.base_model}; task {config.task}")
        emails = inbox.count()
        print(f"inbox: {emails} emails in {len(inbox.mailboxes)} mailboxes, built in {built_s:.2f} s")
        expert = expert_tools(inbox, config, args.expert_questions)
        print(format_expert(expert), flush=True)
        model = art.TrainableModel(name=config.name, project="bench", base_model=config.base_model,
                                   base_path=config.base_path)  # fmt: skip
        backend = LocalBackend()
        try:
            t = time.perf_counter()
            await model.register(backend)
            print(f"model registered in {time.perf_counter() - t:.1f} s")
            rows = await run_rows(model, inbox, config, args)
        finally:
            if model.inference_base_url is not None:
                await model.openai_client().close()
            await backend.close()
            inbox.close()
    print()
    print(format_rows(rows))
    print(LEGEND)
    if args.out_dir is not None:
        out = Path(args.out_dir)
        out.mkdir(parents=True, exist_ok=True)
        path = out / f"bench_email_agent-{'quick' if args.quick else 'default'}-{when:%Y-%m-%d}.json"
        payload = {
            "host": host, "date": when.isoformat(timespec="seconds"), "model": config.base_model,
            "task": asdict(config.task), "temperature": config.temperature, "inbox_emails": emails,
            "rows": [asdict(r) for r in rows], "expert_tools": expert,
        }  # fmt: skip
        path.write_text(json.dumps(payload, indent=1) + "\n")
        print(f"results: {path}")
    return 0


def main(argv: list[str] | None = None) -> None:
    sys.exit(asyncio.run(main_async(parse_args(argv))))


if __name__ == "__main__":
    main()
