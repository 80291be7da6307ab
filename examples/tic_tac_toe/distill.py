"""Distillation for tic-tac-toe: a teacher plays training games, its games become an SFT set.

Two teachers, one format (the very conversation `rollout` builds, so the student is fine-tuned on the
prompts it will see in RL):

- `minimax_move`: a perfect player written here. It never loses (minimax), and among its never-losing moves
  it takes the one with the best expected reward against a uniformly random opponent, which is the one it
  meets (win 1, draw 0.5). `teacher_games` plays it against the seeded training opponents.
- `distill_from_model`: the general recipe, for any OpenAI-compatible teacher model. It plays the task's own
  `rollout` with the teacher as the policy and keeps the games it played well enough (rejection sampling:
  `min_reward`), as plain messages.

Either way `write_sft_file` writes the JSONL file that `art.utils.sft.train_sft_from_file` (or `art sft`)
trains from:

    python -m art.examples.tic_tac_toe.distill --games 300 --out teacher.jsonl
    python -m art.examples.tic_tac_toe.distill --teacher-model gpt-4.1 --teacher-base-url URL --out t.jsonl
"""

from __future__ import annotations

import functools
import json
from collections.abc import Sequence
from pathlib import Path

import openai
from art.examples.tic_tac_toe.env import (
    AGENT,
    CELLS,
    EMPTY,
    LINES,
    OPPONENT,
    Board,
    Game,
    TicTacToeScenario,
    train_scenarios,
)
from art.examples.tic_tac_toe.rollout import (
    TicTacToeConfig,
    first_messages,
    outcome_metrics,
    render_turn,
    rollout,
    score,
)

import art

# Training seeds of teacher games start here: away from the RL demo's first seeds (RL data stays its own).
TEACHER_SEED_START = 500_000

# ---- the perfect teacher ------------------------------------------------------------------------------
# A board is a 9-character string of "X", "O" and "." (row-major, like Board.cells).


def _winner(cells: str) -> str | None:
    for a, b, c in LINES:
        if cells[a] != EMPTY and cells[a] == cells[b] == cells[c]:
            return cells[a]
    return None


def _empty(cells: str) -> list[int]:
    return [i for i, mark in enumerate(cells) if mark == EMPTY]


def _put(cells: str, i: int, mark: str) -> str:
    return cells[:i] + mark + cells[i + 1 :]


@functools.cache
def minimax_value(cells: str, to_move: str) -> int:
    """The game's value for the agent (X) with perfect play from both sides: 1 win, 0 draw, -1 loss."""
    winner = _winner(cells)
    if winner is not None:
        return 1 if winner == AGENT else -1
    moves = _empty(cells)
    if not moves:
        return 0
    nxt = OPPONENT if to_move == AGENT else AGENT
    values = [minimax_value(_put(cells, i, to_move), nxt) for i in moves]
    return max(values) if to_move == AGENT else min(values)


@functools.cache
def expected_reward(cells: str, to_move: str) -> float:
    """The agent's expected reward (win 1, draw 0.5, loss 0) when it plays `minimax_move` from here and the
    opponent plays uniformly at random."""
    winner = _winner(cells)
    if winner is not None:
        return 1.0 if winner == AGENT else 0.0
    moves = _empty(cells)
    if not moves:
        return 0.5
    if to_move == OPPONENT:
        return sum(expected_reward(_put(cells, i, OPPONENT), AGENT) for i in moves) / len(moves)
    return expected_reward(_put(cells, _teacher_index(cells), AGENT), OPPONENT)


@functools.cache
def _teacher_index(cells: str) -> int:
    moves = _empty(cells)
    best = max(minimax_value(_put(cells, i, AGENT), OPPONENT) for i in moves)
    safe = [i for i in moves if minimax_value(_put(cells, i, AGENT), OPPONENT) == best]
    # Best expected reward against the random opponent; ties go to the first cell in board order.
    return max(safe, key=lambda i: (expected_reward(_put(cells, i, AGENT), OPPONENT), -i))


def minimax_move(board: Board) -> str:
    """The perfect teacher's move for the agent (X) on `board` (which must have an empty cell)."""
    cells = "".join(board.cells)
    if not _empty(cells) or _winner(cells) is not None:
        raise ValueError("the game is over: no move to make")
    move: str = CELLS[_teacher_index(cells)]  # (mypy sees art.examples imports as Any)
    return move


def teacher_game(scenario: TicTacToeScenario, config: TicTacToeConfig | None = None) -> art.Trajectory:
    """One game of the minimax teacher against the scenario's seeded opponent, as the rollout writes it:
    every teacher move an assistant message `<move>B2</move>`."""
    config = config or TicTacToeConfig()
    game = Game(scenario, agent_starts=config.agent_starts)
    messages: list[dict[str, str]] = first_messages(game, config)
    while not game.over:
        move = minimax_move(game.board)
        messages.append({"role": "assistant", "content": f"<move>{move}</move>"})
        game.agent_move(messages[-1]["content"])
        if not game.over:
            messages.append({"role": "user", "content": render_turn(game, config, last_agent_move=move)})
    return art.Trajectory(
        messages_and_choices=messages,
        reward=score(game, config),
        metrics=outcome_metrics(game),
        metadata={
            "seed": scenario.seed,
            "split": scenario.split,
            "outcome": game.outcome,
            "teacher": "minimax",
        },
    )


def teacher_games(n: int, *, start: int = 0, config: TicTacToeConfig | None = None) -> list[art.Trajectory]:
    """`n` minimax-teacher games on training seeds TEACHER_SEED_START + start, ... (fast: a cached search)."""
    return [
        teacher_game(scenario, config) for scenario in train_scenarios(n, start=TEACHER_SEED_START + start)
    ]


# ---- the general recipe: any OpenAI-compatible teacher ----------------------------------------------


async def distill_from_model(
    client: openai.AsyncOpenAI,
    teacher_model: str,
    scenarios: Sequence[TicTacToeScenario],
    *,
    config: TicTacToeConfig | None = None,
    min_reward: float = 1.0,
    temperature: float = 0.0,
    max_tokens: int = 16,
) -> list[art.Trajectory]:
    """Play every scenario with `teacher_model` (any OpenAI-compatible server) through the task's own
    `rollout`, and keep the games with reward >= `min_reward` as SFT examples (plain messages: the teacher's
    answers become assistant dicts). Games that raise are counted by `gather` and left out."""
    groups = await art.gather_trajectory_groups(
        [
            art.TrajectoryGroup(
                [
                    rollout(
                        client,
                        teacher_model,
                        s,
                        config=config,
                        temperature=temperature,
                        max_tokens=max_tokens,
                    )
                ]
            )
            for s in scenarios
        ],
        pbar_desc=f"teacher {teacher_model}",
        max_exceptions=len(scenarios),
    )
    return [
        art.Trajectory(
            messages_and_choices=t.messages(),
            tools=t.tools,
            reward=t.reward,
            metrics=t.metrics,
            metadata={**t.metadata, "teacher": teacher_model},
        )
        for g in groups
        for t in g.trajectories
        if t.reward >= min_reward
    ]


def write_sft_file(trajectories: Sequence[art.Trajectory], path: str | Path) -> Path:
    """One `{"messages", "tools", "metadata"}` line per trajectory: the format `train_sft_from_file` reads."""
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    with open(out, "w", encoding="utf-8") as f:
        for t in trajectories:
            line: dict[str, object] = {"messages": t.messages(), "metadata": t.metadata}
            if t.tools:
                line["tools"] = t.tools
            f.write(json.dumps(line) + "\n")
    return out


def main() -> None:
    """Command-line entry: write a teacher's SFT file (the minimax teacher unless --teacher-model)."""
    import argparse
    import asyncio

    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--games", type=int, default=300)
    parser.add_argument("--out", default="teacher.jsonl")
    parser.add_argument("--teacher-model", default=None, help="an OpenAI-compatible model (default: minimax)")
    parser.add_argument("--teacher-base-url", default=None)
    parser.add_argument("--min-reward", type=float, default=1.0)
    args = parser.parse_args()
    if args.teacher_model is None:
        games = teacher_games(args.games)
    else:
        client = openai.AsyncOpenAI(base_url=args.teacher_base_url)
        scenarios = train_scenarios(args.games, start=TEACHER_SEED_START)
        games = asyncio.run(
            distill_from_model(client, args.teacher_model, scenarios, min_reward=args.min_reward)
        )
    path = write_sft_file(games, args.out)
    wins = sum(t.metrics.get("win", 0) for t in games)
    print(f"{path}: {len(games)} games ({wins:.0f} won)")


if __name__ == "__main__":
    main()
