"""Prefill of prompts that share their start: computed once (and kept for the next turn) vs every prompt in full.

    python benchmarks/bench_prefill.py            # default model, 32 prompts, 4 rounds (~2 minutes)
    python benchmarks/bench_prefill.py --quick    # tiny random model made on the spot (< 30 s)

An agent sends its instructions (and tools) with every request, so the prompts a rollout batch admits
together start with the same few hundred tokens. The engine computes such a prefix once, copies its keys and
values to every row, and runs only the rest of each prompt (`art.engines.torch.scheduler`); the prefill token
budget counts the prefix once too, so more prompts join one prefill. And it keeps finished sequences' keys
and values (`art.engines.torch.prefix_cache`): the next turn of a conversation restores its start and runs only
the new tokens. The engine forgets all of it before every round here (`release_idle_cache`), as each round
repeats the last one's prompts. The two rows run on one engine
(`TorchEngine.share_prefixes` on / off), alternated round by round so the machine's drift hits both:

- every request is queued while the engine is paused, then all are admitted at once, as a GRPO batch is;
- each generates one token greedily (temperature 0), so the time is the prefill's (`phase_seconds`);
- results: in float32 sharing gives the same logits to rounding (tests/inference). In bf16 a prompt's
  logits already depend on the batch it joins (matmul and attention blocking differ with the shapes), so
  the script compares sharing's effect with that: first tokens and their logprobs, shared vs in full,
  against in full vs each prompt alone; it fails when sharing moves them clearly more;
- "token positions" counts what the prefills computed (padding included, a shared prefix once).

Then the demo's rollouts, as `art demo` makes them each step: 3 groups x 8 tic-tac-toe games
(`art.examples.tic_tac_toe.rollout`, the demo's prompt, temperature and max_tokens) through the real server
(`art.openai_server.http`) and the official `openai` client, every game's move k sampled with its own seed
(`sample_seed`) so both rows play the same games; prefill-heavy: every move resends the system prompt, two
example turns and the game so far for a few new tokens (ours: the first move shares the common start, each
later move restores its game's previous request). Reported: seconds for all games (median over
rounds), the prefill's share of the engine's time, token positions prefilled, and how many games came out
move for move the same in both rows (bf16: a few may not, see above).
"""

from __future__ import annotations

import argparse
import asyncio
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

ROWS = {True: "starts reused (ours)", False: "every prompt in full"}


def _args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--quick", action="store_true", help="tiny random model made on the spot")
    parser.add_argument("--model", default="smollm2-135m", help="short name, local folder or HF id")
    parser.add_argument("--prompts", type=int, default=32, help="distinct prompts admitted together")
    parser.add_argument("--rules", type=int, default=12, help="sentences in the shared system prompt")
    parser.add_argument("--rounds", type=int, default=4, help="timed rounds per row, alternated")
    parser.add_argument("--groups", type=int, default=3, help="demo rollouts: groups (the demo's 3)")
    parser.add_argument("--group-size", type=int, default=8, help="demo rollouts: games per group")
    return parser.parse_args(argv)


def conversations(prompts: int, rules: int) -> list[list[dict[str, str]]]:
    """`prompts` tic-tac-toe turns under one system prompt of `rules` sentences."""
    system = "You are an agent that plays tic-tac-toe. " + " ".join(
        f"Rule {i}: check row {i % 3} and column {i % 3} before you move, and answer with one move."
        for i in range(rules)
    )
    return [
        [
            {"role": "system", "content": system},
            {"role": "user", "content": f"Board {i}: X at {i % 9}, O at {(i * 5) % 9}. Your move?"},
        ]
        for i in range(prompts)
    ]


async def first_token(engine: Any, prompt: list[int]) -> tuple[int, float]:
    """The prompt's first greedy token and its logprob."""
    from art.engines.base import GenerateRequest, SamplingParams

    request = GenerateRequest(
        model=engine.base_model_name,
        prompt_token_ids=prompt,
        sampling=SamplingParams(max_tokens=1, temperature=0.0),
    )
    outputs = [out async for out in engine.generate(request)]
    return outputs[0].token_ids[0], outputs[0].logprobs[0]


async def admit_together(engine: Any, ids: list[list[int]]) -> tuple[float, int, list[tuple[int, float]]]:
    """All prompts queued while paused, then admitted at once; (prefill seconds, token positions computed,
    each prompt's first greedy token and logprob)."""
    await engine.run(engine.release_idle_cache)  # nothing kept from an earlier round (the prefix cache)
    await engine.pause()
    tasks = [asyncio.create_task(first_token(engine, p)) for p in ids]
    await asyncio.sleep(0.3)  # every request reaches the engine's queue
    seconds, positions = engine.phase_seconds()["prefill"], engine.prefill_tokens
    await engine.resume()
    first = await asyncio.gather(*tasks)
    return engine.phase_seconds()["prefill"] - seconds, engine.prefill_tokens - positions, list(first)


def compare(a: list[tuple[int, float]], b: list[tuple[int, float]]) -> tuple[int, float]:
    """(prompts whose first tokens agree, largest logprob difference among those)."""
    agree = [(x[1], y[1]) for x, y in zip(a, b, strict=True) if x[0] == y[0]]
    return len(agree), max((abs(x - y) for x, y in agree), default=0.0)


async def demo_rollouts(url: str, api_key: str, groups: int, size: int) -> tuple[float, list[str]]:
    """One step's rollouts of the demo through the server: (seconds, each game's moves)."""
    import openai
    from art.examples.tic_tac_toe.env import TicTacToeScenario
    from art.examples.tic_tac_toe.rollout import rollout
    from art.examples.tic_tac_toe.train import DemoConfig

    config = DemoConfig()
    client = openai.AsyncOpenAI(base_url=url, api_key=api_key, max_retries=0, timeout=3600)
    start = time.perf_counter()
    games = await asyncio.gather(
        *(
            rollout(
                client,
                "bench",
                TicTacToeScenario(seed=group),
                config=config.task,
                temperature=config.temperature,
                max_tokens=config.max_tokens,
                sample_seed=(group * size + game) * 1000,
            )
            for group in range(groups)
            for game in range(size)
        )
    )
    seconds = time.perf_counter() - start
    await client.close()
    moves = [
        " | ".join(str(m.get("content")) for m in g.messages() if m.get("role") == "assistant") for g in games
    ]
    return seconds, moves


def demo_table(engine: Any, args: argparse.Namespace) -> None:
    """The demo's rollouts with sharing on and off, alternated on one engine behind the real server."""
    from art.openai_server.http import ServerThread, create_app

    server = ServerThread(create_app(engine, api_key="bench"))
    url = server.start()
    try:
        asyncio.run(demo_rollouts(url, "bench", 1, 2))  # warm-up
        seconds: dict[bool, list[float]] = {True: [], False: []}
        prefill: dict[bool, list[float]] = {True: [], False: []}
        positions: dict[bool, int] = {}
        moves: dict[bool, list[str]] = {}
        for index in range(args.rounds):
            for share in (True, False) if index % 2 == 0 else (False, True):
                engine.share_prefixes = share
                asyncio.run(
                    engine.run(engine.release_idle_cache)
                )  # the same games as the last round: forget it
                before, tokens = engine.phase_seconds(), engine.prefill_tokens
                s, moves[share] = asyncio.run(demo_rollouts(url, "bench", args.groups, args.group_size))
                after = engine.phase_seconds()
                seconds[share].append(s)
                prefill[share].append(
                    (after["prefill"] - before["prefill"])
                    / max(sum(after.values()) - sum(before.values()), 1e-9)
                )
                positions[share] = engine.prefill_tokens - tokens
                print(f"  demo round {index}, {ROWS[share]}: {s:.2f} s", file=sys.stderr, flush=True)
    finally:
        server.stop()
    games = args.groups * args.group_size
    print(
        f"\nthe demo's rollouts: {args.groups} groups x {args.group_size} games through the server, {args.rounds} round(s)"
    )
    print(f"| {'rollouts':<26} | token positions | prefill share | seconds (median) | vs ours |")
    print("|----------------------------|-----------------|---------------|------------------|---------|")
    ours = statistics.median(seconds[True])
    for share, label in ROWS.items():
        med = statistics.median(seconds[share])
        share_pct = statistics.median(prefill[share])
        print(
            f"| {label:<26} | {positions[share]:>15} | {share_pct:>12.0%} | {med:>16.2f} | {med / ours:>6.2f}x |"
        )
    same = sum(a == b for a, b in zip(moves[True], moves[False], strict=True))
    print(f"games move for move the same in both rows: {same}/{games}")


def main(argv: list[str] | None = None) -> int:
    """Alternate the two rows on one engine and print the table."""
    args = _args(argv)
    from art.engines.torch.torch_engine import TorchEngine
    from art.types import RuntimeOptions

    with tempfile.TemporaryDirectory(prefix="art-bench-") as tmp:
        model = args.model
        if args.quick:
            from art.testing.tiny_model import make_tiny_model

            model = str(make_tiny_model(Path(tmp) / "tiny"))
            args.prompts, args.rules, args.rounds = min(args.prompts, 8), min(args.rules, 4), 1
            args.groups, args.group_size = 1, 2
        engine = TorchEngine.from_pretrained(
            model, served_name="bench", options=RuntimeOptions().with_env_overrides()
        )
        chats = conversations(args.prompts, args.rules)
        ids = [engine.chat_template.render_ids(c, add_generation_prompt=True) for c in chats]
        shared = next(
            (i for i, col in enumerate(zip(*ids, strict=False)) if len(set(col)) > 1), min(map(len, ids))
        )
        asyncio.run(admit_together(engine, ids))  # warm-up
        seconds: dict[bool, list[float]] = {True: [], False: []}
        positions: dict[bool, int] = {}
        first: dict[bool, list[tuple[int, float]]] = {}
        for index in range(args.rounds):
            for share in (True, False) if index % 2 == 0 else (False, True):
                engine.share_prefixes = share
                s, positions[share], first[share] = asyncio.run(admit_together(engine, ids))
                seconds[share].append(s)
                print(f"  round {index}, {ROWS[share]}: {s:.3f} s", file=sys.stderr, flush=True)
        alone = [asyncio.run(first_token(engine, p)) for p in ids]
        ok = print_table(args, ids, shared, seconds, positions, first, alone)
        if args.groups and args.group_size:
            demo_table(engine, args)
        engine.share_prefixes = True
        asyncio.run(engine.close())
    return 0 if ok else 1


def print_table(
    args: argparse.Namespace,
    ids: list[list[int]],
    shared: int,
    seconds: dict[bool, list[float]],
    positions: dict[bool, int],
    first: dict[bool, list[tuple[int, float]]],
    alone: list[tuple[int, float]],
) -> bool:
    """The prefill table and the comparison of results; True when sharing moved them no more than batching."""
    name = "tiny (quick)" if args.quick else args.model
    print(
        f"\nbench_prefill: model={name}, {args.prompts} distinct prompts of {min(map(len, ids))}-"
        f"{max(map(len, ids))} tokens sharing their first {shared}, {args.rounds} round(s)"
    )
    print(f"cpu: {cpu_summary()}")
    print(f"| {'prefill':<26} | token positions | seconds (median) | vs ours |")
    print("|----------------------------|-----------------|------------------|---------|")
    ours = statistics.median(seconds[True])
    for share, label in ROWS.items():
        med = statistics.median(seconds[share])
        print(f"| {label:<26} | {positions[share]:>15} | {med:>16.3f} | {med / ours:>6.2f}x |")
    shared_agree, shared_diff = compare(first[True], first[False])
    alone_agree, alone_diff = compare(first[False], alone)
    n = len(ids)
    print(
        f"first greedy tokens, shared vs in full: {shared_agree}/{n} the same (largest logprob difference "
        f"{shared_diff:.2g}); for scale, in full vs each prompt alone: {alone_agree}/{n} ({alone_diff:.2g})"
    )
    ok = shared_agree >= alone_agree - max(1, n // 10) and shared_diff <= 2 * alone_diff + 1e-3
    print(f"sharing changes results no more than joining a batch does: {'yes' if ok else 'NO'}")
    return ok


if __name__ == "__main__":
    sys.exit(main())
