"""Base success of a model (the default: SmolLM2-135M-Instruct) on the example tasks, before any training.

Runs the examples' own rollouts (tic-tac-toe and the email agent) against the model with Hugging Face
`generate` in this process (see hf_chat.py: batched, no server), on held-out scenarios:

- greedy (temperature 0) on `--games` scenarios;
- sampled (temperature 1, full distribution) as `--groups` GRPO groups of `--group-size` rollouts of the
  same scenario, reporting the success rate and how many groups have any reward variance: a group whose
  rewards are all equal teaches GRPO nothing, so that fraction is the training signal a task offers.

    python benchmarks/base_success.py                       # both tasks, default difficulty
    python benchmarks/base_success.py --task email --email-config '{"prefill_search": true, "prefill_read": true}'

Prints one table per task. Measured for SmolLM2-135M-Instruct (bf16, 2 shared CPU cores, held-out
seeds; "variance" = groups of 8 whose rewards are not all equal):

    task                      greedy success   T=1 success   T=1 groups with variance   T=0.7 success
    tic-tac-toe (win)         0/20             2/48 (4%)     6/6                        8/48 (17%)
    inbox QA easy (correct)   12/20 (60%)      13/48 (27%)   3/6                        (42%, max_tokens 96)
    inbox QA medium           0/10             0/16          1/2 (partial credit)
    inbox QA hard             0/10             0/8           0/1

(inbox QA was folded into the email agent, examples/email_agent: its numbers are in that package's
docstring.)
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import time
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
sys.path.insert(0, str(Path(__file__).resolve().parent))

import torch
from art.examples.email_agent import inbox as email_inbox
from art.examples.email_agent import rollout as email_rollout
from art.examples.tic_tac_toe import env as ttt_env
from art.examples.tic_tac_toe import rollout as ttt_rollout
from hf_chat import HFChatClient
from transformers import AutoModelForCausalLM, AutoTokenizer

import art
from art.base_model.default_model import resolve_base_model

Rollout = Callable[[Any, Any, float], Awaitable[art.Trajectory]]


def summarize(trajectories: Sequence[art.Trajectory], success: str) -> dict[str, float]:
    """Mean reward, success rate and the mean of every metric."""
    out = {"n": float(len(trajectories)), "reward": statistics.fmean(t.reward for t in trajectories)}
    out["success"] = statistics.fmean(float(t.metrics[success]) for t in trajectories)
    for key in trajectories[0].metrics:
        out[key] = statistics.fmean(float(t.metrics[key]) for t in trajectories)
    return out


async def measure(
    name: str,
    client: HFChatClient,
    run: Rollout,
    scenarios: list[Any],
    success: str,
    games: int,
    groups: int,
    group_size: int,
    temperatures: Sequence[float] = (1.0,),
) -> list[tuple[str, dict[str, float]]]:
    """Greedy over `games` scenarios, then `groups` sampled groups per temperature; labelled summaries."""
    rows = []
    start = time.monotonic()
    if games:
        greedy = await asyncio.gather(*(run(client, s, 0.0) for s in scenarios[:games]))
        rows.append((f"greedy, {games} scenarios", summarize(greedy, success)))
        print(f"[{name}] greedy done in {time.monotonic() - start:.0f} s", flush=True)
    for temperature in temperatures:
        rows.append(
            await measure_groups(name, client, run, scenarios, success, groups, group_size, temperature)
        )
    return rows


async def measure_groups(
    name: str,
    client: HFChatClient,
    run: Rollout,
    scenarios: list[Any],
    success: str,
    groups: int,
    group_size: int,
    temperature: float,
) -> tuple[str, dict[str, float]]:
    """`groups` GRPO groups of `group_size` sampled rollouts at `temperature`."""
    start = time.monotonic()
    grouped = await asyncio.gather(
        *(
            asyncio.gather(*(run(client, s, temperature) for _ in range(group_size)))
            for s in scenarios[:groups]
        )
    )
    flat = [t for group in grouped for t in group]
    summary = summarize(flat, success)
    summary["groups_with_variance"] = statistics.fmean(
        float(len({round(t.reward, 6) for t in group}) > 1) for group in grouped
    )
    summary["groups_with_a_success"] = statistics.fmean(
        float(any(t.metrics[success] for t in group)) for group in grouped
    )
    print(f"[{name}] T={temperature} done in {time.monotonic() - start:.0f} s", flush=True)
    for t in flat[:: max(1, len(flat) // 3)][:3]:
        replies = [
            (m.message.content or "")
            + "".join(
                f"{c.function.name}({c.function.arguments})"
                for c in m.message.tool_calls or []
                if c.type == "function"
            )
            for m in t.messages_and_choices[-6:]
            if not isinstance(m, dict)
        ]
        print(f"[{name}] sample reward={t.reward:.2f} model replies={replies}", flush=True)
    return f"T={temperature}, {groups}x{group_size}", summary


def print_table(title: str, rows: list[tuple[str, dict[str, float]]]) -> None:
    """A plain-text table: one row per setting, one column per number."""
    keys = list(dict.fromkeys(k for _, row in rows for k in row))
    widths = [max(len(k), 6) + 2 for k in keys]
    print(f"\n{title}")
    print(f"{'setting':<20}" + "".join(f"{k:>{w}}" for k, w in zip(keys, widths, strict=True)))
    for label, row in rows:
        cells = (f"{row[k]:>{w}.3f}" if k in row else " " * w for k, w in zip(keys, widths, strict=True))
        print(f"{label:<20}" + "".join(cells))


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="smollm2-135m", help="short name, HF id or local folder")
    parser.add_argument("--task", choices=["ttt", "email", "both"], default="both")
    parser.add_argument("--games", type=int, default=20, help="greedy scenarios per task")
    parser.add_argument("--groups", type=int, default=4, help="sampled GRPO groups per task")
    parser.add_argument("--group-size", type=int, default=8)
    parser.add_argument("--temperatures", default="1.0", help="comma-separated sampling temperatures")
    parser.add_argument("--dtype", choices=["bfloat16", "float32"], default="bfloat16")
    parser.add_argument("--ttt-config", default="{}", help="JSON overrides of TicTacToeConfig")
    parser.add_argument("--email-config", default="{}", help="JSON overrides of the email agent's TaskConfig")
    args = parser.parse_args()

    torch.manual_seed(0)
    path = resolve_base_model(args.model)
    tokenizer = AutoTokenizer.from_pretrained(path)
    model: Any = AutoModelForCausalLM.from_pretrained(path, dtype=getattr(torch, args.dtype))
    model.eval()
    client = HFChatClient(model, tokenizer)
    temps = [float(t) for t in args.temperatures.split(",")]
    begin = time.monotonic()

    if args.task in ("ttt", "both"):
        ttt_config = ttt_rollout.TicTacToeConfig(**json.loads(args.ttt_config))

        def play(client: Any, scenario: Any, temperature: float) -> Awaitable[art.Trajectory]:
            return ttt_rollout.rollout(client, "base", scenario, config=ttt_config, temperature=temperature)

        scenarios = ttt_env.val_scenarios(max(args.games, args.groups))
        rows = await measure(
            "ttt", client, play, scenarios, "win", args.games, args.groups, args.group_size, temps
        )
        print_table(f"tic-tac-toe, {args.model}, {ttt_config}", rows)

    if args.task in ("email", "both"):
        email_config = email_rollout.TaskConfig(**json.loads(args.email_config))
        store = email_inbox.Inbox.build()

        def ask(client: Any, question: Any, temperature: float) -> Awaitable[art.Trajectory]:
            return email_rollout.rollout(
                client, "base", store, question, config=email_config, temperature=temperature
            )

        questions = store.questions("val")[: max(args.games, args.groups)]
        rows = await measure(
            "email", client, ask, questions, "correct", args.games, args.groups, args.group_size, temps
        )
        print_table(f"email agent, {args.model}, {email_config}", rows)
        store.close()

    await client.close()
    print(
        f"\n{time.monotonic() - begin:.0f} s, {client.generated_tokens} tokens generated "
        f"({client.generate_seconds:.0f} s in generate), torch threads {torch.get_num_threads()}"
    )


if __name__ == "__main__":
    asyncio.run(main())
