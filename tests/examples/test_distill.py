"""Tic-tac-toe distillation: the minimax teacher is perfect, its games are the rollout's conversations, and
the general recipe distils any OpenAI-compatible teacher (a scripted one served over HTTP on 127.0.0.1)."""

from __future__ import annotations

import json
import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import openai
import pytest

pytest.importorskip("fastapi", reason="needs the `local` extra: pip install -e '.[local]'")

from art.examples.tic_tac_toe.distill import (
    distill_from_model,
    expected_reward,
    minimax_move,
    teacher_game,
    teacher_games,
    write_sft_file,
)
from art.examples.tic_tac_toe.env import AGENT, CELLS, OPPONENT, Board, parse_move, train_scenarios

from art.utils.sft import iterate_file, scan_file


def outcomes(board: Board) -> Iterator[str]:
    """Every way a game can end with the teacher as X (to move) against any opponent."""
    board.play(minimax_move(board), AGENT)
    if board.winner() == AGENT:
        yield "win"
    elif board.is_full():
        yield "draw"
    else:
        for cell in board.legal_moves():
            after = Board(list(board.cells))
            after.play(cell, OPPONENT)
            if after.winner() == OPPONENT:
                yield "loss"
            elif after.is_full():
                yield "draw"
            else:
                yield from outcomes(after)


def test_the_minimax_teacher_never_loses_and_exploits_a_random_opponent() -> None:
    ends = list(outcomes(Board()))
    assert "loss" not in ends and len(ends) > 50
    assert expected_reward("." * 9, AGENT) > 0.99  # win 1, draw 0.5 against a uniformly random opponent
    board = Board(list("XX.OO...."))
    assert minimax_move(board) == "A3"  # takes the win
    assert minimax_move(Board(list("X.O.O...."))) == "C1"  # blocks the diagonal
    games = teacher_games(60)
    assert sum(t.metrics["win"] for t in games) >= 58 and not any(t.metrics["loss"] for t in games)


# ---- a scripted OpenAI-compatible teacher ------------------------------------------------------------

BOARD = re.compile(r"  1 2 3\nA (.) (.) (.)\nB (.) (.) (.)\nC (.) (.) (.)")


def scripted_teacher_app(log: list[dict[str, Any]]) -> Any:
    """Answers the minimax move for the last board it is shown, except model "clumsy" on the second move
    of each game, which answers a taken cell."""
    from fastapi import FastAPI

    app = FastAPI()

    @app.post("/v1/chat/completions")
    async def chat(body: dict[str, Any]) -> dict[str, Any]:
        log.append(body)
        last = body["messages"][-1]["content"]
        board = Board(list("".join(BOARD.findall(last)[-1])))
        move = minimax_move(board)
        if body["model"] == "clumsy" and len(board.legal_moves()) < 8:
            move = next(c for c, mark in zip(CELLS, board.cells, strict=True) if mark != ".")
        return {
            "id": "chatcmpl-teacher",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": body["model"],
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": f"<move>{move}</move>"},
                    "finish_reason": "stop",
                }
            ],
        }

    return app


@pytest.fixture()
def teacher_url() -> Iterator[tuple[str, list[dict[str, Any]]]]:
    from art.openai_server.http import ServerThread

    log: list[dict[str, Any]] = []
    server = ServerThread(scripted_teacher_app(log))
    url = server.start("127.0.0.1", 0)
    yield url, log
    server.stop()


async def test_distilling_any_openai_compatible_teacher(
    teacher_url: tuple[str, list[dict[str, Any]]], tmp_path: Path
) -> None:
    url, log = teacher_url
    client = openai.AsyncOpenAI(base_url=url, api_key="teacher-key")
    scenarios = train_scenarios(6, start=500_000)
    kept = await distill_from_model(client, "scripted", scenarios)
    assert len(log) > 6 and all(body["model"] == "scripted" for body in log)
    # A teacher that plays the minimax moves writes exactly the minimax teacher's games (the rollout format),
    # as plain assistant messages; games it did not win are left out.
    reference = {t.metadata["seed"]: t for t in (teacher_game(s) for s in scenarios)}
    won = [s.seed for s in scenarios if reference[s.seed].reward >= 1.0]
    assert [t.metadata["seed"] for t in kept] == won and won
    for t in kept:
        assert t.messages() == reference[t.metadata["seed"]].messages()
        assert all(isinstance(m, dict) for m in t.messages_and_choices)
        assert parse_move(t.messages()[-1]["content"]) is not None
    assert await distill_from_model(client, "clumsy", scenarios) == []  # every game lost on an illegal move

    path = write_sft_file(kept, tmp_path / "teacher.jsonl")
    assert scan_file(path).valid_rows == len(kept)
    first = json.loads(path.read_text().splitlines()[0])
    assert first["messages"][-1]["role"] == "assistant" and first["metadata"]["teacher"] == "scripted"
    assert sorted(t.messages()[-1]["content"] for t in iterate_file(str(path))) == sorted(
        t.messages()[-1]["content"] for t in kept
    )
