"""Tic-tac-toe for the reference's example (`examples/tic_tac_toe/game_utils.py` there), in our words:
the same functions, names and behaviour (XML moves such as `<move>B2</move>`, a random opponent)."""

from __future__ import annotations

import random
import xml.etree.ElementTree as ET
from typing import Literal, TypedDict

# The original rollout's system prompt (inline there), shared with compat_model's teaching data.
SYSTEM_PROMPT = (
    "You are a tic-tac-toe player. You are playing against an opponent. Always choose the move most likely "
    "to lead to an eventual win. Return your move as an XML object with a single property 'move', like so: "
    "<move>A1</move>. Optional moves are 'A1', 'B3', 'C2', etc. You are the {agent_symbol} symbol."
)


class TicTacToeGame(TypedDict):
    board: list[list[str]]
    agent_symbol: Literal["x", "o"]
    opponent_symbol: Literal["x", "o"]


def generate_game(board_length: int = 3) -> TicTacToeGame:
    """An empty board; the agent plays x or o at random."""
    agent: Literal["x", "o"] = random.choice(["x", "o"])
    return {
        "board": [["_"] * board_length for _ in range(board_length)],
        "agent_symbol": agent,
        "opponent_symbol": "o" if agent == "x" else "x",
    }


def render_board(game: TicTacToeGame) -> str:
    """Columns 1..n across, rows A.. down, `_` for an empty cell."""
    board = game["board"]
    lines = ["   " + "   ".join(str(c + 1) for c in range(len(board)))]
    lines += [f"{chr(ord('A') + r)}  " + " | ".join(row) for r, row in enumerate(board)]
    return "\n".join(lines) + "\n"


def get_opponent_move(game: TicTacToeGame) -> tuple[int, int]:
    """A random empty cell."""
    size = len(game["board"])
    return random.choice([(r, c) for r in range(size) for c in range(size) if game["board"][r][c] == "_"])


def apply_agent_move(game: TicTacToeGame, move: str) -> None:
    """Play the agent's `<move>B2</move>`; ValueError for bad XML, a cell off the board or taken."""
    try:
        square = ET.fromstring(move).text
    except Exception:
        raise ValueError("Invalid xml") from None
    try:
        assert square is not None
        row, col = ord(square[0]) - ord("A"), int(square[1]) - 1
    except Exception:
        raise ValueError("Unable to parse square") from None
    size = len(game["board"])
    if not (0 <= row < size and 0 <= col < size):
        raise ValueError(f"Invalid move, row or column out of bounds: {row}, {col}")
    if game["board"][row][col] != "_":
        raise ValueError("Square already occupied")
    game["board"][row][col] = game["agent_symbol"]


def check_winner(board: list[list[str]]) -> Literal["x", "o", "draw"] | None:
    """The symbol with a full row, column or diagonal; "draw" on a full board; else None."""
    size = len(board)
    lines = [list(row) for row in board]
    lines += [[board[r][c] for r in range(size)] for c in range(size)]
    lines += [[board[i][i] for i in range(size)], [board[i][size - 1 - i] for i in range(size)]]
    for line in lines:
        if line[0] != "_" and line.count(line[0]) == size:
            return line[0]  # type: ignore[return-value]
    if all(cell != "_" for row in board for cell in row):
        return "draw"
    return None
