"""One game of tic-tac-toe played by a model through any OpenAI-compatible chat API, as an art.Trajectory.

The conversation: a short system prompt, two worked example turns (`few_shot`, plain dicts: context,
not trained), then "New game." and the board (by default with the list of empty cells); the model
answers `<move>B2</move>`; the opponent answers and the next user turn shows the new board. Every reply
is appended as the response's `Choice`, so every move is a trainable turn.

Why the examples and the list: SmolLM2-135M-Instruct at temperature 1 makes a legal, well-formed
first move 0-12% of the time with instructions alone (it copies the whole list of cells, or chats), and
about 30% with the two examples and the list. Base success with these defaults (20 held-out games
greedy, 6 groups x 8 sampled; benchmarks/base_success.py): greedy wins 0% (its first move concatenates
the examples' answers, "<move>B2C3</move>"); temperature 1 wins 4%, 0.6 legal moves per game, and 6 of
6 groups have reward variance thanks to the shaping below; temperature 0.7 wins 17%.

Reward (`TicTacToeConfig`):
- win 1, draw 0.5, loss 0; an illegal or unparseable move loses on the spot;
- shaping, on by default: a game that is lost (to the opponent, or by an illegal move) earns
  `legal_move_bonus` (0.1) per legal move the agent made. "Three legal moves, then a blunder" then beats
  "forfeit on move one", which gives a 135M model a gradient long before it wins games. The bonus
  never lifts a loss to a draw: at most 4 legal moves fit in a lost game, 4 x 0.1 = 0.4 < 0.5.
  Set `legal_move_bonus=0` for the unshaped reward.

Metrics: win, draw, loss, illegal (1 when the game ended on an illegal/unparseable move), num_moves
(legal moves the agent made).
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any

import openai

import art

from .env import Board, Game, TicTacToeScenario

SYSTEM_PROMPT = (
    "You play tic-tac-toe as X against O. Cells are a row letter and a column number: B2 is the centre. "
    "Reply with one empty cell in a move tag, like <move>B2</move>."
)


@dataclass(frozen=True)
class TicTacToeConfig:
    """Reward shaping and prompt options (defaults are the ones the demo trains with)."""

    legal_move_bonus: float = 0.1  # per legal move, only in lost games; 0 = pure win/draw/loss reward
    show_legal_moves: bool = True  # list the empty cells under the board (much easier for tiny models)
    few_shot: bool = True  # start the conversation with two example moves (see the module docstring)
    agent_starts: bool = True  # False: the opponent opens the game


def render_turn(game: Game, config: TicTacToeConfig, last_agent_move: str | None = None) -> str:
    """The user message the model sees before each of its moves."""
    parts = []
    if last_agent_move is not None:
        parts.append(f"You played {last_agent_move}. O played {game.last_opponent_move}.")
    elif game.last_opponent_move is not None:
        parts.append(f"O played {game.last_opponent_move}.")
    parts.append(game.board.render())
    if config.show_legal_moves:
        parts.append("Empty cells: " + " ".join(game.board.legal_moves()))
    parts.append("Your move?")
    return "\n".join(parts)


def example_messages(config: TicTacToeConfig) -> list[dict[str, str]]:
    """Two worked example turns that show the answer format (empty list when `few_shot` is off)."""
    if not config.few_shot:
        return []
    board = Board()
    first = board.render() + (
        f"\nEmpty cells: {' '.join(board.legal_moves())}" if config.show_legal_moves else ""
    )
    board.play("B2", "X")
    board.play("A1", "O")
    second = board.render() + (
        f"\nEmpty cells: {' '.join(board.legal_moves())}" if config.show_legal_moves else ""
    )
    return [
        {"role": "user", "content": f"{first}\nYour move?"},
        {"role": "assistant", "content": "<move>B2</move>"},
        {"role": "user", "content": f"You played B2. O played A1.\n{second}\nYour move?"},
        {"role": "assistant", "content": "<move>C3</move>"},
    ]


def outcome_metrics(game: Game) -> dict[str, float | int]:
    """A finished game's metrics: win, draw, loss, illegal (0 or 1 each) and num_moves."""
    return {
        "win": float(game.outcome == "win"),
        "draw": float(game.outcome == "draw"),
        "loss": float(game.outcome == "loss"),
        "illegal": float(game.illegal),
        "num_moves": game.agent_moves,
    }


def first_messages(game: Game, config: TicTacToeConfig) -> list[dict[str, str]]:
    """The conversation before the agent's first move: system prompt, examples, and the new game's board."""
    return [
        {"role": "system", "content": SYSTEM_PROMPT},
        *example_messages(config),
        {"role": "user", "content": ("New game.\n" if config.few_shot else "") + render_turn(game, config)},
    ]


def score(game: Game, config: TicTacToeConfig) -> float:
    """The reward of a finished game (see the module docstring)."""
    if game.outcome == "win":
        return 1.0
    if game.outcome == "draw":
        return 0.5
    return config.legal_move_bonus * game.agent_moves


def branch_move(scenario: TicTacToeScenario, board: Board, turn: int, index: int) -> str:
    """The cell a branched game plays at `turn`: the `index`-th (mod their number) of `board`'s empty cells,
    shuffled by the scenario's seed and the turn, so the games of a group that reach one board with
    indices 0..n-1 play n different cells (all of them when n >= their number)."""
    cells = board.legal_moves()
    random.Random(f"branch-{scenario.seed}-{turn}").shuffle(cells)
    return cells[index % len(cells)]


async def rollout(
    client: openai.AsyncOpenAI,
    model_name: str,
    scenario: TicTacToeScenario,
    *,
    config: TicTacToeConfig | None = None,
    temperature: float = 1.0,
    max_tokens: int = 16,
    sample_seed: int | None = None,
    branch: tuple[int, int] | None = None,
) -> art.Trajectory:
    """Play one full game against the seeded random opponent and return the scored trajectory.

    sample_seed: when set, the model's k-th move is sampled with request seed `sample_seed + k`, so the
    game is reproducible and two models compared on it draw the same random numbers (held-out games).
    branch: `(turn, index)`: the agent's move at that turn (0 = its first) is not sampled but forced, with
    the server's `guided_choice`, to the `index`-th (mod their number) of the board's empty cells in an
    order fixed by the scenario's seed; the server reports the policy's own logprobs of those tokens, so
    the move trains as a sampled one. A group whose games take indices 0, 1, ... compares that many moves
    at one board even when the policy would sample a single one (`branch_move`).
    """
    config = config or TicTacToeConfig()
    game = Game(scenario, agent_starts=config.agent_starts)
    trajectory = art.Trajectory(
        messages_and_choices=first_messages(game, config),
        metadata={"seed": scenario.seed, "split": scenario.split},
    )
    turn = 0
    while not game.over:
        forced: dict[str, Any] = {}
        if branch is not None and turn == branch[0]:
            cell = branch_move(scenario, game.board, turn, branch[1])
            forced = {"extra_body": {"guided_choice": [f"<move>{cell}</move>"]}}
            trajectory.log(f"branch: move {turn + 1} forced to {cell}")
        response = await client.chat.completions.create(
            model=model_name,
            messages=trajectory.messages(),
            temperature=temperature,
            max_tokens=max_tokens,
            logprobs=True,
            seed=None if sample_seed is None else sample_seed + turn,
            **forced,
        )
        turn += 1
        choice = response.choices[0]
        trajectory.messages_and_choices.append(choice)
        move = game.agent_move(choice.message.content)
        if game.illegal:
            trajectory.log(f"illegal move {move or 'unparseable'}: {choice.message.content!r}")
        elif not game.over:
            trajectory.messages_and_choices.append(
                {"role": "user", "content": render_turn(game, config, last_agent_move=move)}
            )
    trajectory.reward = score(game, config)
    trajectory.metrics = outcome_metrics(game)
    trajectory.metadata["outcome"] = game.outcome
    trajectory.log("final board:\n" + game.board.render())
    return trajectory
