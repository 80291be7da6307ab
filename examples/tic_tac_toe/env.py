"""Tic-tac-toe rules, a seeded random opponent, the board as text, and move parsing.

The board has rows A-C (top to bottom) and columns 1-3 (left to right); a cell is named row then column,
so "B2" is the centre. The agent plays X and the opponent O. The agent answers with exactly one move tag:

    <move>B2</move>

`parse_move` is strict about that shape (one tag, one row letter, one column digit) and forgiving about
whitespace and case (`< MOVE > b 2 </Move>` is B2). Text around the tag is allowed. A reply with no tag,
two tags, or a cell that is taken counts as an illegal move, and an illegal move loses the game.

The opponent plays uniformly random legal moves from `random.Random(seed)`: given the same seed and the
same agent moves, it always answers the same way, so the rollouts of one GRPO group face the same
opponent and differ only by what the agent does. A scenario's `opponent_skill` (0 by default, and always 0
in held-out games) makes it sharper: before each move it draws from the same generator, and with that
probability it takes a winning cell, else blocks the agent's winning cell, when there is one (`Opponent`).
Training against a sharper opponent keeps games lost by a loose move lost, where a random opponent lets
most of them go. A scenario's `opening_plies` (0 by default, and always 0 in held-out games) starts the
game in the middle: that many random moves, X's and O's in turn from a generator of the seed's own, are
on the board before the agent's first turn, so training sees the positions a fixed opening line never
reaches (a line to complete, a threat to block) and shorter games. A scenario's `opponent_seed` (None by
default: the scenario's seed) gives the opponent a generator of its own while the opening stays the seed's:
the games of one group can then meet different opponents on the same board.
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass, field
from typing import Literal

ROWS = "ABC"
COLS = "123"
CELLS: tuple[str, ...] = tuple(r + c for r in ROWS for c in COLS)
AGENT, OPPONENT, EMPTY = "X", "O", "."
LINES: tuple[tuple[int, int, int], ...] = (
    (0, 1, 2), (3, 4, 5), (6, 7, 8),  # rows
    (0, 3, 6), (1, 4, 7), (2, 5, 8),  # columns
    (0, 4, 8), (2, 4, 6),  # diagonals
)  # fmt: skip

Outcome = Literal["win", "draw", "loss"]

_MOVE_TAG = re.compile(r"<\s*move\s*>(.*?)<\s*/\s*move\s*>", re.IGNORECASE | re.DOTALL)
_CELL = re.compile(r"\s*([abc])\s*([123])\s*", re.IGNORECASE)

TRAIN_SEED_START = 0
VAL_SEED_START = 1_000_000  # held-out games: seeds no training scenario uses
SELECT_SEED_START = 1_500_000  # validation games that pick a checkpoint (`selection_scenarios`)


def parse_move(text: str | None) -> str | None:
    """The cell named in the reply's single `<move>..</move>` tag ("B2"), or None when unparseable.

    Unparseable: no tag, more than one tag, or a tag that does not hold exactly one cell.
    """
    if not text:
        return None
    tags = _MOVE_TAG.findall(text)
    if len(tags) != 1:
        return None
    cell = _CELL.fullmatch(tags[0])
    return (cell.group(1) + cell.group(2)).upper() if cell else None


def cell_index(cell: str) -> int:
    """0-8 index of a cell name such as "B2" (row-major)."""
    return CELLS.index(cell)


@dataclass
class Board:
    """A 3x3 board; `cells[i]` is "X", "O" or "." for CELLS[i]."""

    cells: list[str] = field(default_factory=lambda: [EMPTY] * 9)

    def legal_moves(self) -> list[str]:
        """Empty cells, in board order (A1, A2, ... C3)."""
        return [name for name, mark in zip(CELLS, self.cells, strict=True) if mark == EMPTY]

    def is_legal(self, cell: str | None) -> bool:
        """Whether `cell` names an empty cell (None, or a cell that does not exist, is not legal)."""
        return cell in CELLS and self.cells[cell_index(cell)] == EMPTY

    def play(self, cell: str, mark: str) -> None:
        """Put `mark` on `cell`; raises ValueError for an illegal move."""
        if not self.is_legal(cell):
            raise ValueError(f"illegal move {cell!r}: legal moves are {', '.join(self.legal_moves())}")
        self.cells[cell_index(cell)] = mark

    def winner(self) -> str | None:
        """The mark ("X" or "O") that holds a full line, else None."""
        for a, b, c in LINES:
            if self.cells[a] != EMPTY and self.cells[a] == self.cells[b] == self.cells[c]:
                return self.cells[a]
        return None

    def is_full(self) -> bool:
        """Whether no empty cell is left."""
        return EMPTY not in self.cells

    def is_over(self) -> bool:
        """A win for either side, or a full board."""
        return self.winner() is not None or self.is_full()

    def render(self) -> str:
        """The board as the model sees it: a header of column numbers, then one line per row."""
        lines = ["  1 2 3"]
        for r, row in enumerate(ROWS):
            lines.append(row + " " + " ".join(self.cells[3 * r : 3 * r + 3]))
        return "\n".join(lines)


def completing_cell(board: Board, mark: str) -> str | None:
    """The first empty cell (in board order) that would complete a line of `mark`, or None."""
    for a, b, c in LINES:
        line = [board.cells[a], board.cells[b], board.cells[c]]
        if line.count(mark) == 2 and line.count(EMPTY) == 1:
            return CELLS[(a, b, c)[line.index(EMPTY)]]
    return None


class Opponent:
    """Plays O from its own `random.Random(seed)`: a uniformly random legal move, except that with
    probability `skill` (drawn before each move; never drawn when `skill` is 0, so a skill-0 opponent's
    moves are those of the plain random opponent of the same seed) it takes a winning cell, else blocks
    the agent's winning cell, when one exists."""

    def __init__(self, seed: int | str, skill: float = 0.0) -> None:
        if not 0.0 <= skill <= 1.0:
            raise ValueError(f"opponent skill must be within [0, 1], got {skill}")
        self.rng = random.Random(seed)
        self.skill = skill

    def move(self, board: Board) -> str:
        """The opponent's move on `board` (which must have a legal move)."""
        if self.skill and self.rng.random() < self.skill:
            sharp = completing_cell(board, OPPONENT) or completing_cell(board, AGENT)
            if sharp is not None:
                return sharp
        return self.rng.choice(board.legal_moves())


class RandomOpponent(Opponent):
    """Plays a uniformly random legal move, drawn from its own `random.Random(seed)`."""

    def __init__(self, seed: int) -> None:
        super().__init__(seed, skill=0.0)


OPENING_PLIES = (0, 2, 4)
"""The openings a scenario may start after: an even number of plies (the agent, X, moves next), and at most
4, after which neither side can have won."""


@dataclass(frozen=True)
class TicTacToeScenario:
    """One game: the seed fixes the opponent's choices; `split` is "train" or "val"; `opponent_skill` is
    the chance per move that the opponent takes a win or blocks one (`Opponent`; 0: a random opponent);
    `opening_plies` random moves (0, 2 or 4) are on the board before the agent's first turn (`opening`);
    `opponent_seed`, when set, seeds the opponent instead of `seed` (the opening stays `seed`'s)."""

    seed: int
    split: str = "train"
    opponent_skill: float = 0.0
    opening_plies: int = 0
    opponent_seed: str | None = None

    def __post_init__(self) -> None:
        if self.opening_plies not in OPENING_PLIES:
            raise ValueError(f"opening_plies must be one of {OPENING_PLIES}, got {self.opening_plies}")


def opening(scenario: TicTacToeScenario) -> list[str]:
    """The scenario's opening: `opening_plies` uniformly random legal cells, X's and O's in turn (X first),
    from a generator of the seed's own (the opponent's draws stay those of the same seed without one)."""
    rng = random.Random(f"opening-{scenario.seed}")
    board, cells = Board(), []
    for ply in range(scenario.opening_plies):
        cell = rng.choice(board.legal_moves())
        board.play(cell, AGENT if ply % 2 == 0 else OPPONENT)
        cells.append(cell)
    return cells


def train_scenarios(
    n: int, start: int = 0, opponent_skill: float = 0.0, max_opening_plies: int = 0
) -> list[TicTacToeScenario]:
    """`n` training games with seeds TRAIN_SEED_START + start, ... (disjoint from the validation seeds),
    against an opponent of `opponent_skill` (see `Opponent`). With `max_opening_plies` (2 or 4), the games
    start after 0, 2, ... up to that many random plies in turn, by seed (see `opening`)."""
    if start < 0 or TRAIN_SEED_START + start + n > VAL_SEED_START:
        raise ValueError(f"training seeds must stay below {VAL_SEED_START}")
    if max_opening_plies not in OPENING_PLIES:
        raise ValueError(f"max_opening_plies must be one of {OPENING_PLIES}, got {max_opening_plies}")
    kinds = max_opening_plies // 2 + 1
    return [
        TicTacToeScenario(seed, "train", opponent_skill, opening_plies=2 * (seed % kinds))
        for seed in range(TRAIN_SEED_START + start, TRAIN_SEED_START + start + n)
    ]


def val_scenarios(n: int) -> list[TicTacToeScenario]:
    """`n` held-out games (seeds VAL_SEED_START, ...): the same games every time, never trained on."""
    if n > SELECT_SEED_START - VAL_SEED_START:
        raise ValueError(f"at most {SELECT_SEED_START - VAL_SEED_START} held-out games")
    return [TicTacToeScenario(VAL_SEED_START + i, "val") for i in range(n)]


def selection_scenarios(n: int) -> list[TicTacToeScenario]:
    """`n` validation games for picking a checkpoint (seeds SELECT_SEED_START, ...): never trained on, and
    apart from the held-out games, so the checkpoint chosen on them is measured on games it was not
    chosen by."""
    return [TicTacToeScenario(SELECT_SEED_START + i, "val") for i in range(n)]


@dataclass
class Game:
    """A game in progress: the board, the opponent, and how it ended.

    `agent_move(text)` takes the model's raw reply: it parses the move, plays it (or ends the game as
    an illegal-move loss), then lets the opponent answer if the game goes on.
    """

    scenario: TicTacToeScenario
    agent_starts: bool = True
    board: Board = field(default_factory=Board)
    outcome: Outcome | None = None
    illegal: bool = False
    agent_moves: int = 0  # legal moves the agent made
    last_opponent_move: str | None = None

    def __post_init__(self) -> None:
        scenario = self.scenario
        opponent_seed = scenario.seed if scenario.opponent_seed is None else scenario.opponent_seed
        self.opponent = Opponent(opponent_seed, scenario.opponent_skill)
        if scenario.opening_plies and not self.agent_starts:
            raise ValueError(
                "a scenario with opening_plies starts with the agent to move: use agent_starts=True"
            )
        for ply, cell in enumerate(opening(scenario)):
            self.board.play(cell, AGENT if ply % 2 == 0 else OPPONENT)
            if ply % 2:
                self.last_opponent_move = cell
        if not self.agent_starts:
            self._opponent_turn()

    @property
    def over(self) -> bool:
        """Whether the game has ended."""
        return self.outcome is not None

    def agent_move(self, text: str | None) -> str | None:
        """Apply the agent's reply; returns the parsed cell (None if unparseable). Ends illegal games."""
        if self.over:
            raise RuntimeError("the game is over")
        cell = parse_move(text)
        if cell is None or not self.board.is_legal(cell):
            self.outcome, self.illegal = "loss", True
            return cell
        self.board.play(cell, AGENT)
        self.agent_moves += 1
        if not self._settle():
            self._opponent_turn()
        return cell

    def _opponent_turn(self) -> None:
        self.last_opponent_move = self.opponent.move(self.board)
        self.board.play(self.last_opponent_move, OPPONENT)
        self._settle()

    def _settle(self) -> bool:
        winner = self.board.winner()
        if winner is not None:
            self.outcome = "win" if winner == AGENT else "loss"
        elif self.board.is_full():
            self.outcome = "draw"
        return self.outcome is not None
