"""Why an RL-only tic-tac-toe policy stops learning: its mistakes, and how far sampling can explore them.

    python benchmarks/ttt_policy_probe.py --record /tmp/lrn --name rl-only-seed-2 --step 84

Reads a `learning.py` record (`--base-path` of that run): the held-out games of `--step` (logged as the
`val` split), and for each game whether one of the agent's moves missed an immediate win
(two X in a line, the third cell empty) or an immediate block (two O). Then it serves the record's newest
checkpoint and, at every move of those games, samples 16 replies at a few temperatures and top_p values:
how many are malformed, how many distinct moves appear per position. A group of GRPO learns only where its
games differ; a position where 16 samples at temperature 2 give one move teaches nothing, whatever the
reward. The OpenAI API caps temperature at 2, and so does our server.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import json
import re
from pathlib import Path
from typing import Any

import art
from art.local import LocalBackend

LINES = ((0, 1, 2), (3, 4, 5), (6, 7, 8), (0, 3, 6), (1, 4, 7), (2, 5, 8), (0, 4, 8), (2, 4, 6))
CELLS = [row + col for row in "ABC" for col in "123"]
SETTINGS = ((0.7, 1.0), (1.5, 1.0), (2.0, 1.0), (2.0, 0.95), (2.0, 0.8))
MOVE = re.compile(r"<move>\s*([ABC][123])\s*</move>")


def board_of(user_text: str) -> str:
    """The 9 cells ('X', 'O', '.') of the board rendered in a user turn."""
    rows = [line for line in user_text.splitlines() if re.match(r"^[ABC] ", line)]
    return "".join("".join(line.split()[1:]) for line in rows)


def chat_of(trajectory: dict[str, Any]) -> list[tuple[list[dict[str, str]], str]]:
    """(messages before the move, the move's text) for each of the agent's sampled moves."""
    history: list[dict[str, str]] = []
    moves = []
    for item in trajectory["messages_and_choices"]:
        if "role" in item:
            history.append({"role": item["role"], "content": item["content"]})
        else:  # a sampled choice: the agent's move in this game
            text = item["message"]["content"] or ""
            moves.append((list(history), text))
            history.append({"role": "assistant", "content": text})
    return moves


def mistakes(trajectory: dict[str, Any]) -> tuple[bool, bool]:
    """(missed an immediate win, missed an immediate block) over the agent's moves of one game; a move that
    takes a win where a block was due misses nothing."""
    missed_win = missed_block = False
    for before, text in chat_of(trajectory):
        found = MOVE.search(text)
        if not found:
            continue
        grid, cell = board_of(before[-1]["content"]), CELLS.index(found.group(1))
        wins = [line for line in LINES if sorted(grid[i] for i in line) == [".", "X", "X"]]
        blocks = [line for line in LINES if sorted(grid[i] for i in line) == [".", "O", "O"]]
        if wins and not any(cell in line for line in wins):
            missed_win = True
        elif blocks and not wins and not any(cell in line for line in blocks):  # a win beats a block
            missed_block = True
    return missed_win, missed_block


async def probe(args: argparse.Namespace, lost: list[dict[str, Any]]) -> None:
    model = art.TrainableModel(name=args.name, project=args.project, base_model=args.base_model)
    backend = LocalBackend(path=args.record)
    await model.register(backend)
    client = model.openai_client()
    positions = [before for t in lost for before, _ in chat_of(t)][: args.positions]
    print(f"sampling 16 replies at each of {len(positions)} positions of the games not won:")
    for temperature, top_p in SETTINGS:
        malformed, distinct = 0, []
        for messages in positions:
            reply = await client.chat.completions.create(
                model=model.get_inference_name(), messages=messages,  # type: ignore[arg-type]
                temperature=temperature, top_p=top_p, max_tokens=12, n=16,
            )  # fmt: skip
            found = [MOVE.search(c.message.content or "") for c in reply.choices]
            malformed += sum(f is None for f in found)
            distinct.append(len({f.group(1) for f in found if f}))
        one = sum(d == 1 for d in distinct)
        print(
            f"  temperature {temperature}, top_p {top_p}: malformed {malformed}/{16 * len(positions)}; "
            f"one move in 16 at {one} of {len(positions)} positions; distinct moves {distinct}"
        )
    await backend.close()


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--record", required=True, help="the learning.py run's --base-path")
    parser.add_argument("--name", required=True, help="the arm's model name, e.g. rl-only-seed-2")
    parser.add_argument("--project", default="demo")
    parser.add_argument("--base-model", default="smollm2-135m")
    parser.add_argument("--step", type=int, required=True, help="the validated step whose games to read")
    parser.add_argument("--positions", type=int, default=13, help="positions to sample at")
    args = parser.parse_args()
    games = Path(args.record) / args.project / "models" / args.name / "trajectories" / "val"
    path = games / f"{args.step:04d}.jsonl"
    if not path.exists():
        parser.exit(2, f"no validation games at {path}: --step must be a step the run validated\n")
    trajectories = [t for line in path.open() for t in json.loads(line)["trajectories"]]
    outcomes: collections.Counter[tuple[str, bool, bool]] = collections.Counter()
    for t in trajectories:
        outcomes[(t["metadata"]["outcome"], *mistakes(t))] += 1
    print(f"{len(trajectories)} games of step {args.step}: outcome, missed a win, missed a block -> games")
    for (outcome, win, block), n in sorted(outcomes.items()):
        print(f"  {outcome:5} {'missed win' if win else '':10} {'missed block' if block else '':12} {n}")
    lost = [t for t in trajectories if t["metadata"]["outcome"] != "win"]
    asyncio.run(probe(args, lost))


if __name__ == "__main__":
    main()
