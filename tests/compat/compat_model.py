"""The model the reference's examples run on here: a tiny random model, briefly taught the answer formats
the examples parse (`<move>B2</move>`, `<move>left</move>`, `A. Name` lines) and to end its turn.

A random tiny model never writes a parsable move, so every rollout would earn the same reward and no step
would train. Taught the formats (answers drawn at random, so right and wrong moves both occur), it plays
badly but variously, rewards differ within a group, and every step of the examples really trains, in a
few seconds of CPU at fixture time.
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import game_2048
import tic_tac_toe_game

from art.testing.tiny_model import make_tiny_model

NAMES = ["fox", "dog", "brown"]  # words the tiny tokenizer knows whole: answers a tiny model can learn
PLACES = ["board", "row"]


def temporal_clue_puzzles(n: int, seed: int = 0) -> list[dict[str, Any]]:
    """Stand-ins for the reference's puzzles.json (absent here): the same fields (num_clues, prompt,
    solution), short prompts, answers checked by the example's own regex (`A. Name`)."""
    rng = random.Random(seed)
    puzzles = []
    for i in range(n):
        who, where = rng.choice(NAMES), rng.choice(PLACES)
        prompt = (
            f"Puzzle {i}. Clue 1: the person is {who}. Clue 2: the room is {where}.\n"
            "A. Who did it?\nB. Where?\nAnswer each as 'A. <answer>'."
        )
        puzzles.append({"num_clues": 2, "prompt": prompt, "solution": {"A": who, "B": where}})
    return puzzles


def _tic_tac_toe_sample(rng: random.Random) -> tuple[list[dict[str, str]], str]:
    """A game after 0-2 played turns, and a move for the next (drawn at random: right or wrong)."""
    game = tic_tac_toe_game.generate_game()
    prompt = tic_tac_toe_game.SYSTEM_PROMPT.format(agent_symbol=game["agent_symbol"])
    messages = [{"role": "system", "content": prompt}]
    if game["agent_symbol"] == "o":  # the opponent opens, as in the rollout
        r, c = tic_tac_toe_game.get_opponent_move(game)
        game["board"][r][c] = game["opponent_symbol"]
    for _ in range(rng.randint(0, 2)):
        empty = [(r, c) for r in range(3) for c in range(3) if game["board"][r][c] == "_"]
        r, c = rng.choice(empty)
        move = f"<move>{'ABC'[r]}{c + 1}</move>"
        messages.append({"role": "user", "content": tic_tac_toe_game.render_board(game)})
        messages.append({"role": "assistant", "content": move})
        tic_tac_toe_game.apply_agent_move(game, move)
        if tic_tac_toe_game.check_winner(game["board"]) is not None:
            break
        r, c = tic_tac_toe_game.get_opponent_move(game)
        game["board"][r][c] = game["opponent_symbol"]
        if tic_tac_toe_game.check_winner(game["board"]) is not None:
            break
    messages.append({"role": "user", "content": tic_tac_toe_game.render_board(game)})
    return messages, f"<move>{rng.choice('ABC')}{rng.choice('123')}</move>"


def _samples(rng: random.Random) -> list[tuple[list[dict[str, str]], str]]:
    samples: list[tuple[list[dict[str, str]], str]] = []
    for _ in range(64):
        samples.append(_tic_tac_toe_sample(rng))
    for _ in range(32):
        board = game_2048.generate_game()
        messages = [{"role": "system", "content": game_2048.SYSTEM_PROMPT}]
        for _ in range(rng.randint(0, 2)):
            messages.append({"role": "user", "content": game_2048.render_board(board)})
            move = rng.choice(game_2048.DIRECTIONS)
            game_2048.apply_agent_move(board, f"<move>{move}</move>")
            messages.append({"role": "assistant", "content": f"<move>{move}</move>"})
        messages.append({"role": "user", "content": game_2048.render_board(board)})
        samples.append((messages, f"<move>{rng.choice(game_2048.DIRECTIONS)}</move>"))
    for puzzle in temporal_clue_puzzles(32, seed=1):
        # right half the time (the names are in the clues), so some answers score and others do not
        who, where = puzzle["solution"]["A"], puzzle["solution"]["B"]
        who = who if rng.random() < 0.5 else rng.choice(NAMES)
        where = where if rng.random() < 0.5 else rng.choice(PLACES)
        samples.append(([{"role": "user", "content": puzzle["prompt"]}], f"A. {who}\nB. {where}"))
    return samples


def make_compat_model(path: Path, steps: int = 60, seed: int = 0) -> Path:
    """A tiny model at `path` that answers in the examples' formats (see the module docstring)."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    make_tiny_model(path, embedding_std=0.1, max_position_embeddings=1024, seed=seed)
    tokenizer = AutoTokenizer.from_pretrained(path)
    model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32)
    rng = random.Random(seed)
    state = random.getstate()
    random.seed(seed)  # the games' boards
    try:
        samples = _samples(rng)
    finally:
        random.setstate(state)
    rows = []
    for messages, answer in samples:
        prompt = tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
        prompt_ids = tokenizer(prompt, add_special_tokens=False)["input_ids"]
        answer_ids = tokenizer(answer + "<|im_end|>", add_special_tokens=False)["input_ids"]
        rows.append((prompt_ids + answer_ids, [-100] * len(prompt_ids) + answer_ids))
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # a tiny model: one thread is as fast, and much faster on a busy machine
    torch.manual_seed(seed)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)
    model.train()
    for _ in range(steps):
        batch = rng.sample(rows, 16)
        width = max(len(ids) for ids, _ in batch)
        pad = tokenizer.pad_token_id
        input_ids = torch.tensor([ids + [pad] * (width - len(ids)) for ids, _ in batch])
        labels = torch.tensor([lab + [-100] * (width - len(lab)) for _, lab in batch])
        attention = torch.tensor([[1] * len(ids) + [0] * (width - len(ids)) for ids, _ in batch])
        loss = model(input_ids=input_ids, attention_mask=attention, labels=labels).loss
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    torch.set_num_threads(threads)
    model.save_pretrained(path)
    return path
