"""2048 for the reference's example (`examples/2048/utils.py` there), in our words: the same functions,
names and behaviour (XML moves such as `<move>left</move>`, a game won at 128)."""

from __future__ import annotations

import random
import string
import xml.etree.ElementTree as ET
from typing import TypedDict

WINNING_VALUE = 128
DIRECTIONS = ("left", "right", "up", "down")
# The original rollout's system prompt (inline there), shared with compat_model's teaching data.
SYSTEM_PROMPT = (
    "You are an excellent 2048 player. Always choose the move most likely to lead to combine cells to "
    "eventually reach the number 2048. Optional moves are 'left', 'right', 'up', 'down'. Return your move "
    "as an XML object with a single property 'move', like so: <move>left</move>"
)


class TwentyFortyEightGame(TypedDict):
    id: str
    board: list[list[int | None]]


def populate_random_cell(game: TwentyFortyEightGame) -> None:
    """A 2 (90%) or a 4 (10%) in a random empty cell."""
    empty = [(r, c) for r, row in enumerate(game["board"]) for c, cell in enumerate(row) if cell is None]
    r, c = random.choice(empty)
    game["board"][r][c] = 2 if random.random() < 0.9 else 4


def generate_game(board_length: int = 4) -> TwentyFortyEightGame:
    """A board with two random cells, and a six-character id."""
    game = TwentyFortyEightGame(
        id="".join(random.choices(string.ascii_letters + string.digits, k=6)),
        board=[[None] * board_length for _ in range(board_length)],
    )
    populate_random_cell(game)
    populate_random_cell(game)
    return game


def render_board(game: TwentyFortyEightGame) -> str:
    """Rows of cells joined by `|`, right-aligned, `_` for empty ones."""
    width = max(len(str(cell)) for row in game["board"] for cell in row if cell is not None)
    return "".join(
        "|".join(("_" if cell is None else str(cell)).rjust(width) for cell in row) + "\n"
        for row in game["board"]
    )


def condense_sequence(sequence: list[int | None]) -> list[int | None]:
    """Slide toward the start, merging equal neighbours once (the first pair first)."""
    values = [v for v in sequence if v is not None]
    out: list[int | None] = []
    i = 0
    while i < len(values):
        if i + 1 < len(values) and values[i] == values[i + 1]:
            out.append(values[i] * 2)
            i += 2
        else:
            out.append(values[i])
            i += 1
    return out + [None] * (len(sequence) - len(out))


def condense_board(game: TwentyFortyEightGame, direction: str) -> None:
    """Move every line of the board toward `direction`."""
    board = game["board"]
    size = len(board)
    for k in range(size):
        if direction in ("left", "right"):
            line = board[k] if direction == "left" else board[k][::-1]
            merged = condense_sequence(line)
            board[k] = merged if direction == "left" else merged[::-1]
        else:
            column = [board[r][k] for r in range(size)]
            line = column if direction == "up" else column[::-1]
            merged = condense_sequence(line)
            merged = merged if direction == "up" else merged[::-1]
            for r in range(size):
                board[r][k] = merged[r]


def apply_agent_move(game: TwentyFortyEightGame, move_xml: str) -> None:
    """Play `<move>left</move>` and add a random cell; ValueError for bad XML or an unknown direction."""
    try:
        direction = ET.fromstring(move_xml).text
    except Exception:
        raise ValueError("Invalid xml") from None
    if direction not in DIRECTIONS:
        raise ValueError("Invalid direction")
    condense_board(game, direction)
    populate_random_cell(game)


def max_cell_value(game: TwentyFortyEightGame) -> int:
    return max(cell for row in game["board"] for cell in row if cell is not None)


def check_game_finished(game: TwentyFortyEightGame) -> bool:
    """Won (a cell reached WINNING_VALUE) or no empty cell left."""
    if max_cell_value(game) >= WINNING_VALUE:
        return True
    return not any(cell is None for row in game["board"] for cell in row)


def total_board_value(game: TwentyFortyEightGame) -> int:
    return sum(cell for row in game["board"] for cell in row if cell is not None)
