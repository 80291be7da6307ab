"""Tic-tac-toe: rules, the seeded opponent, move parsing, scoring, and the rollout through a real client."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from art.examples.tic_tac_toe.env import (
    CELLS,
    VAL_SEED_START,
    Board,
    Game,
    RandomOpponent,
    TicTacToeScenario,
    parse_move,
    train_scenarios,
    val_scenarios,
)
from art.examples.tic_tac_toe.rollout import SYSTEM_PROMPT, TicTacToeConfig, rollout

import art


def board_of(rows: str) -> Board:
    """A board from 9 characters, e.g. "XXO.O...X" (row-major)."""
    return Board(list(rows.replace(" ", "")))


def test_legal_moves_and_play() -> None:
    board = Board()
    assert board.legal_moves() == list(CELLS)
    board.play("B2", "X")
    board.play("A1", "O")
    assert (
        "B2" not in board.legal_moves() and "A1" not in board.legal_moves() and len(board.legal_moves()) == 7
    )
    assert board.is_legal("C3") and not board.is_legal("B2") and not board.is_legal("D1")
    assert not board.is_legal(None)
    with pytest.raises(ValueError, match="illegal move 'B2'"):
        board.play("B2", "O")
    assert board.render() == "  1 2 3\nA O . .\nB . X .\nC . . ."


@pytest.mark.parametrize(
    ("rows", "winner"),
    [
        ("XXX OO. ...", "X"), ("... OOO XX.", "O"), ("XO. XO. ..X", None), ("..X O.X ..X", "X"),
        (".O. XOX .O.", "O"), ("X.. OXO ..X", "X"), ("..O XO. O.X", "O"), ("... ... ...", None),
    ],
)  # fmt: skip
def test_wins_on_rows_columns_and_diagonals(rows: str, winner: str | None) -> None:
    board = board_of(rows)
    assert board.winner() == winner
    assert board.is_over() == (winner is not None)


def test_draw_is_a_full_board_without_a_line() -> None:
    board = board_of("XOX XOO OXX")
    assert board.winner() is None and board.is_full() and board.is_over() and board.legal_moves() == []
    almost = board_of("XOX XOO OX.")
    assert not almost.is_over()


def test_opponent_is_deterministic_by_seed_and_plays_legal_moves() -> None:
    def moves(seed: int) -> list[str]:
        board, opponent, played = Board(), RandomOpponent(seed), []
        while not board.is_full():
            played.append(opponent.move(board))
            board.play(played[-1], "O")
        return played

    assert moves(3) == moves(3)
    assert sorted(moves(3)) == list(CELLS)
    assert len({tuple(moves(seed)) for seed in range(20)}) > 15


@pytest.mark.parametrize(
    ("text", "cell"),
    [
        ("<move>B2</move>", "B2"), ("<move>b2</move>", "B2"), ("  <MOVE> c 3 </Move>\n", "C3"),
        ("I take the corner. <move>A1</move>", "A1"), ("<move>\nA3\n</move> good luck", "A3"),
        ("< move >C1< / move >", "C1"),
        ("B2", None), ("<move>B2", None), ("<move>D1</move>", None), ("<move>B4</move>", None),
        ("<move>B2C3</move>", None), ("<move>2B</move>", None), ("<move></move>", None),
        ("<move>B2</move><move>B2</move>", None), ("<move>centre</move>", None), ("", None), (None, None),
    ],
)  # fmt: skip
def test_parse_move(text: str | None, cell: str | None) -> None:
    assert parse_move(text) == cell


def test_game_illegal_and_unparseable_moves_lose() -> None:
    game = Game(TicTacToeScenario(seed=1))
    game.agent_move("<move>B2</move>")
    assert not game.over and game.agent_moves == 1 and game.last_opponent_move in CELLS
    game.agent_move(f"<move>{game.last_opponent_move}</move>")  # the opponent's cell: taken
    assert game.over and game.outcome == "loss" and game.illegal and game.agent_moves == 1
    with pytest.raises(RuntimeError):
        game.agent_move("<move>A1</move>")

    garbled = Game(TicTacToeScenario(seed=1))
    garbled.agent_move("I think B2")
    assert garbled.outcome == "loss" and garbled.illegal and garbled.agent_moves == 0


def play_first_free(game: Game) -> None:
    while not game.over:
        game.agent_move(f"<move>{game.board.legal_moves()[0]}</move>")


def test_games_end_in_wins_draws_and_losses_and_are_reproducible() -> None:
    outcomes = []
    for seed in range(40):
        game = Game(TicTacToeScenario(seed))
        play_first_free(game)
        again = Game(TicTacToeScenario(seed))
        play_first_free(again)
        assert game.board == again.board and game.outcome == again.outcome
        assert not game.illegal and game.board.is_over()
        outcomes.append(game.outcome)
    assert {"win", "loss", "draw"} <= set(outcomes)
    second = Game(TicTacToeScenario(0), agent_starts=False)
    assert second.board.cells.count("O") == 1 and second.last_opponent_move is not None


def test_scenarios_have_disjoint_seeds() -> None:
    train, val = train_scenarios(50), val_scenarios(50)
    assert {s.split for s in train} == {"train"} and {s.split for s in val} == {"val"}
    assert max(s.seed for s in train) < VAL_SEED_START <= min(s.seed for s in val)
    assert train_scenarios(3, start=10)[0].seed == 10
    with pytest.raises(ValueError):
        train_scenarios(10, start=VAL_SEED_START - 5)
    from art.examples.tic_tac_toe.env import selection_scenarios

    select = selection_scenarios(50)
    assert not {s.seed for s in select} & ({s.seed for s in val_scenarios(1000)} | {s.seed for s in train})
    with pytest.raises(ValueError, match="held-out games"):
        val_scenarios(600_000)  # would reach the validation games' seeds


def _first_free_move(body: dict[str, Any]) -> dict[str, Any]:
    """A scripted model that always plays the first free square of the board it was shown."""
    board = _board_from_prompt(body["messages"][-1]["content"])
    return {"content": f"<move>{board.legal_moves()[0]}</move>"}


def _board_from_prompt(text: str) -> Board:
    rows = [line[2:].split() for line in text.splitlines() if re.match(r"^[ABC] [XO.] [XO.] [XO.]$", line)]
    return Board([cell for row in rows[-3:] for cell in row])


async def test_rollout_plays_a_full_game_through_the_openai_client(
    scripted_server: Any, openai_client: Any
) -> None:
    scripted_server.script = _first_free_move
    scenario = TicTacToeScenario(seed=7, split="val")
    trajectory = await rollout(openai_client, "agent-001", scenario, temperature=0.5, max_tokens=12)

    expected = Game(scenario)
    play_first_free(expected)
    outcome = expected.outcome
    assert trajectory.metadata["outcome"] == outcome and trajectory.metadata["seed"] == 7
    assert trajectory.reward == {"win": 1.0, "draw": 0.5, "loss": 0.1 * expected.agent_moves}[outcome or ""]
    assert trajectory.metrics == {
        "win": float(outcome == "win"), "draw": float(outcome == "draw"), "loss": float(outcome == "loss"),
        "illegal": 0.0, "num_moves": expected.agent_moves,
    }  # fmt: skip
    assert trajectory.num_trainable_turns() == expected.agent_moves == len(scripted_server.requests)
    request = scripted_server.requests[0]
    assert request["model"] == "agent-001" and request["temperature"] == 0.5 and request["max_tokens"] == 12
    assert request["messages"][0] == {"role": "system", "content": SYSTEM_PROMPT}
    assert "tools" not in request
    trajectory.validate_for_record()


async def test_seeded_rollout_sends_one_seed_per_move_and_unseeded_sends_none(
    scripted_server: Any, openai_client: Any
) -> None:
    scripted_server.script = _first_free_move
    scenario = TicTacToeScenario(seed=7, split="val")
    await rollout(openai_client, "m", scenario, sample_seed=700)
    seeds = [r.get("seed") for r in scripted_server.requests]
    assert len(seeds) >= 3 and seeds == list(range(700, 700 + len(seeds)))
    scripted_server.requests.clear()
    await rollout(openai_client, "m", scenario)
    assert all(r.get("seed") is None for r in scripted_server.requests)


async def test_rollout_illegal_move_loses_with_shaping_switch(
    scripted_server: Any, openai_client: Any
) -> None:
    scripted_server.script = lambda body: {"content": "<move>B2</move>"}  # legal once, then taken
    shaped = await rollout(openai_client, "m", TicTacToeScenario(seed=3))
    assert shaped.metrics["illegal"] == 1.0 and shaped.metrics["num_moves"] == 1
    assert shaped.reward == pytest.approx(0.1) and shaped.num_trainable_turns() == 2
    pure = await rollout(
        openai_client, "m", TicTacToeScenario(seed=3), config=TicTacToeConfig(legal_move_bonus=0)
    )
    assert pure.reward == 0.0

    scripted_server.script = lambda body: {"content": "B2 please"}
    garbled = await rollout(
        openai_client, "m", TicTacToeScenario(seed=3), config=TicTacToeConfig(few_shot=False)
    )
    assert garbled.reward == 0.0 and garbled.metrics["num_moves"] == 0 and garbled.metrics["loss"] == 1.0
    assert [m["role"] for m in garbled.messages()] == ["system", "user", "assistant"]


def test_the_time_budget_starts_only_steps_that_fit() -> None:
    from art.examples.tic_tac_toe.train import fits_budget

    assert fits_budget(0.0, 10_000.0, 60.0)  # no budget: never stops
    assert fits_budget(1800.0, 0.0, 0.0)  # the first step always starts
    assert fits_budget(1800.0, 1700.0, 100.0)  # ends exactly at the budget
    assert not fits_budget(1800.0, 1750.0, 60.0)  # would end 10 s past it
    assert not fits_budget(1800.0, 1800.0, 0.0)  # spent


def test_the_budget_expects_the_worst_step_of_recent_ones_every_group_trainable() -> None:
    from art.examples.tic_tac_toe.train import RECENT_STEPS, StepClock, fits_budget

    clock = StepClock()
    assert clock.worst_step_s(3) == 0.0  # nothing measured: the first step always starts
    # seed 1 of the 30-minute benchmark, before its last step: steps that trained 1 group (~12 s of
    # rollouts, ~26 s of training), rounds that trained none; the next step trained 2 groups in 64 s
    for rollouts_s, training_s, trainable in [
        (12.0, 26.0, 1),
        (11.0, 1.0, 0),
        (13.0, 27.0, 1),
        (18.0, 0.5, 0),
    ]:
        clock.record(rollouts_s, training_s, trainable)
    assert clock.worst_step_s(3) == 18.0 + 3 * 27.0  # the longest rollouts, all 3 groups at the slowest pace
    assert not fits_budget(1800.0, 1730.0, clock.worst_step_s(3) + 23.0)  # so the step did not start
    # a step that trained 3 groups in 107 s sets the pace (35.7 s a group) until RECENT_STEPS later ones did
    clock.record(12.0, 107.0, 3)
    assert clock.worst_step_s(3) == 18.0 + 107.0
    for _ in range(RECENT_STEPS):
        clock.record(10.0, 20.0, 1)
    assert clock.worst_step_s(3) == 10.0 + 3 * 20.0


def test_the_first_rl_step_after_a_warm_up_is_guessed_from_its_pace() -> None:
    from art.examples.tic_tac_toe.train import RL_OVER_SFT_SECONDS, StepClock, fits_budget

    # seed 1 of the 10-minute benchmark: SFT ended at 8.2 min (20 s a batch of 8 sequences), the 32
    # validation games took 27 s; the first RL step then took 75 s and overran the budget by 18 s
    clock = StepClock()
    clock.guess_from_warmup(game_s=27.0 / 32, sft_sequence_s=20.0 / 8, group_size=8)
    guess = clock.worst_step_s(3)
    assert guess == 24 * 27.0 / 32 + 3 * 8 * 2.5 * RL_OVER_SFT_SECONDS
    assert guess >= 75.0  # at least what that step took
    assert not fits_budget(600.0, 8.2 * 60 + 27.0, guess + 27.0)  # so it does not start
    # a first step that trained nothing measures the rollouts only: training keeps the SFT guess
    clock.record(14.0, 0.5, 0)
    assert clock.worst_step_s(3) == 14.0 + 3 * 8 * 2.5 * RL_OVER_SFT_SECONDS
    clock.record(13.0, 26.0, 1)  # the first step that trained replaces the guess
    assert clock.worst_step_s(3) == 14.0 + 3 * 26.0


def test_the_plan_line_says_what_the_run_does() -> None:
    from art.examples.tic_tac_toe.train import DemoConfig, plan_line

    assert plan_line(DemoConfig()).startswith("8 RL steps; each plays 3 games 8 times")
    assert "trains the LoRA adapter once (learning rate 0.00015)" in plan_line(DemoConfig())
    warmup = plan_line(DemoConfig.sft_warmup())
    assert (
        "SFT on 96 minimax-teacher games (2 epoch(s)) as step 1, then RL steps (up to 1000 within 30 min of "
        "training)" in warmup
    )
    assert "(learning rate 5e-05)" in warmup
    sft_only = plan_line(DemoConfig(steps=0, sft_games=96, time_budget_minutes=30, evaluate_base=False))
    assert "no RL" in sft_only and "within 30 min" in sft_only and "RL steps" not in sft_only
    assert sft_only.endswith("Held-out: 64 games after training.")


def test_the_best_validated_checkpoint_is_reported() -> None:
    from art.examples.tic_tac_toe.train import EvalResult, best_checkpoint

    def scored(reward: float) -> EvalResult:
        return EvalResult("m", 32, win=reward, draw=0.0, loss=1 - reward, illegal=0.0, reward=reward)

    # RL drifted after step 8: the best validation score wins, not the last checkpoint.
    assert best_checkpoint([(1, scored(0.7)), (4, scored(0.9)), (8, scored(0.95)), (12, scored(0.6))]) == 8
    assert best_checkpoint([(4, scored(0.9)), (8, scored(0.9))]) == 8  # a tie: the one that trained more
    with pytest.raises(ValueError, match="select_games"):
        best_checkpoint([])


def test_the_plan_line_names_checkpoint_selection() -> None:
    from art.examples.tic_tac_toe.train import DemoConfig, plan_line

    line = plan_line(DemoConfig.sft_warmup())
    assert "best on 32 other validation games, played every 4 steps" in line
    assert "Held-out: 64 games before and after training." in line  # not every 4 steps: validation is
    assert "validation" not in plan_line(DemoConfig())


def test_exploration_heats_up_while_no_group_differs_and_cools_when_one_does() -> None:
    from art.examples.tic_tac_toe.train import DemoConfig, next_temperature

    config = DemoConfig(resample_rounds=0)  # 0.7, steps of 0.1, up to 1.5
    t = config.temperature
    for expected in (0.8, 0.9, 1.0):  # three rounds in which every group played its games alike
        t = next_temperature(config, t, trainable=0)
        assert t == pytest.approx(expected)
    assert next_temperature(config, t, trainable=1) == pytest.approx(0.9)  # it trained: cooler
    assert next_temperature(config, t, trainable=3) == pytest.approx(0.9)
    assert next_temperature(config, 0.7, trainable=1) == 0.7  # never below the configured one
    assert next_temperature(config, 1.5, trainable=0) == 1.5  # capped
    fixed = DemoConfig(temperature_step=0.0)
    assert next_temperature(fixed, 0.7, trainable=0) == 0.7
    resampling = DemoConfig(resample_rounds=2, groups_per_step=3)  # a step that did not fill up heats
    assert next_temperature(resampling, 0.7, trainable=2) == pytest.approx(0.8)
    assert next_temperature(resampling, 0.8, trainable=3) == pytest.approx(0.7)


def test_rl_after_the_sft_warm_up_trains_at_a_lower_learning_rate_unless_told_otherwise() -> None:
    from art.examples.tic_tac_toe.train import SFT_THEN_RL_LEARNING_RATE, DemoConfig, demo_config

    assert DemoConfig().learning_rate > SFT_THEN_RL_LEARNING_RATE
    assert DemoConfig.sft_warmup().learning_rate == SFT_THEN_RL_LEARNING_RATE
    assert demo_config(sft_warmup=True, quick=True).learning_rate == SFT_THEN_RL_LEARNING_RATE
    # `art demo --sft-warmup --learning-rate 1e-4` still sets it
    assert demo_config(sft_warmup=True, learning_rate=1e-4).learning_rate == 1e-4
    assert demo_config(rl_only=True).learning_rate == DemoConfig().learning_rate  # RL alone keeps its rate
    assert demo_config().learning_rate == SFT_THEN_RL_LEARNING_RATE  # `art demo`: after its SFT step


def test_the_demo_default_is_the_warm_start_and_rl_only_is_rl_alone() -> None:
    from art.examples.tic_tac_toe.train import RL_ONLY_NAME, DemoConfig, demo_config, plan_line

    default = demo_config()
    assert plan_line(default).startswith(
        "SFT on 96 minimax-teacher games (2 epoch(s)) as step 1, then 7 RL steps; each plays 2 games 8 times"
    )
    assert (
        "Held-out: 64 games before and after training. The reported checkpoint is the best on 32 other "
        "validation games, played every 4 steps." in plan_line(default)
    )
    assert not default.eval_after_sft and default.time_budget_minutes == 0  # 8 steps, no budget
    rl_only = demo_config(rl_only=True)
    assert (rl_only.sft_games, rl_only.steps, rl_only.name) == (0, 8, RL_ONLY_NAME)
    assert plan_line(rl_only) == plan_line(DemoConfig()) and default.name != RL_ONLY_NAME
    quick = demo_config(quick=True)  # a smoke run of the same shape: a small SFT step, then 2 RL steps
    assert (quick.sft_games, quick.sft_epochs, quick.steps, quick.val_games) == (8, 1, 2, 8)
    with pytest.raises(ValueError, match="sft_warmup and rl_only"):
        demo_config(sft_warmup=True, rl_only=True)


def test_a_skilled_opponent_takes_its_win_else_blocks_and_skill_0_is_the_random_opponent() -> None:
    from art.examples.tic_tac_toe.env import Opponent

    win_or_block = board_of("XX. OO. ...")  # O can win on B3, X threatens A3
    assert Opponent(seed=1, skill=1.0).move(win_or_block) == "B3"
    block = board_of("XX. O.. ...")
    assert Opponent(seed=1, skill=1.0).move(block) == "A3"
    for seed in range(20):  # skill 0 draws exactly what the random opponent draws
        plain, zero, board = RandomOpponent(seed), Opponent(seed, skill=0.0), Board()
        while not board.is_full():
            move = plain.move(board)
            assert zero.move(board) == move
            board.play(move, "O")
    # Sharper on average: from the same position, a half-skilled opponent blocks more often than a random one.
    blocks = sum(Opponent(seed, skill=0.5).move(block) == "A3" for seed in range(400))
    randoms = sum(RandomOpponent(seed).move(block) == "A3" for seed in range(400))
    assert blocks > randoms + 100, (blocks, randoms)
    with pytest.raises(ValueError, match="opponent skill"):
        Opponent(seed=0, skill=1.5)
    assert {s.opponent_skill for s in train_scenarios(3, opponent_skill=0.5)} == {0.5}
    assert {s.opponent_skill for s in val_scenarios(3)} == {0.0}  # held-out games: the random opponent


def test_a_scenario_with_an_opening_starts_mid_game_the_same_way_every_time_with_the_agent_to_move() -> None:
    from art.examples.tic_tac_toe.env import opening

    for seed in range(30):
        for plies in (2, 4):
            game = Game(TicTacToeScenario(seed, opening_plies=plies))
            again = Game(TicTacToeScenario(seed, opening_plies=plies))
            assert game.board.cells == again.board.cells  # the seed fixes the opening
            assert (game.board.cells.count("X"), game.board.cells.count("O")) == (plies // 2, plies // 2)
            assert not game.over and game.agent_moves == 0  # the agent moves next; the opening is not its
            assert game.last_opponent_move == opening(TicTacToeScenario(seed, opening_plies=plies))[-1]
        # no opening: the empty board and the opponent's draws of the plain scenario
        plain, empty = Game(TicTacToeScenario(seed)), Game(TicTacToeScenario(seed, opening_plies=0))
        for g in (plain, empty):
            g.agent_move("<move>B2</move>")
        assert plain.board.cells == empty.board.cells and plain.board.cells.count(".") == 7
    openings = {tuple(opening(TicTacToeScenario(seed, opening_plies=4))) for seed in range(30)}
    assert len(openings) > 20  # seeds start from different positions
    # the opponent plays on from the opening with the seed's own draws
    game = Game(TicTacToeScenario(3, opening_plies=2))
    cell = next(c for c in CELLS if game.board.is_legal(c))
    game.agent_move(f"<move>{cell}</move>")
    assert game.board.cells.count("O") == 2 and game.board.cells.count("X") == 2
    with pytest.raises(ValueError, match="opening_plies must be one of"):
        TicTacToeScenario(0, opening_plies=3)
    with pytest.raises(ValueError, match="agent_starts=True"):
        Game(TicTacToeScenario(0, opening_plies=2), agent_starts=False)


def test_training_games_mix_openings_up_to_the_maximum_and_held_out_games_start_empty() -> None:
    assert {s.opening_plies for s in train_scenarios(12)} == {0}
    assert {s.opening_plies for s in train_scenarios(12, max_opening_plies=4)} == {0, 2, 4}
    mix = [s.opening_plies for s in train_scenarios(12, max_opening_plies=2)]
    assert sorted(set(mix)) == [0, 2] and mix.count(0) == mix.count(2)
    assert {s.opening_plies for s in val_scenarios(12)} == {0}
    with pytest.raises(ValueError, match="max_opening_plies must be one of"):
        train_scenarios(3, max_opening_plies=5)


class _StubModel:
    """What `gather_step_groups` uses of a model: the served name and a client."""

    def __init__(self, client: Any) -> None:
        self.client = client

    def get_inference_name(self) -> str:
        return "m"

    def openai_client(self) -> Any:
        return self.client


async def test_dynamic_sampling_plays_fresh_games_until_enough_groups_differ(
    scripted_server: Any, openai_client: Any
) -> None:
    """A step whose groups all got equal rewards plays fresh games (up to `resample_rounds` more rounds) and
    trains on the groups that differ; when every round's groups are alike, it keeps the first round's."""
    from art.examples.tic_tac_toe.train import DemoConfig, differs, gather_step_groups

    config = DemoConfig(group_size=4, groups_per_step=2, resample_rounds=2)
    fresh_asked: list[int] = []

    def fresh(n: int) -> list[TicTacToeScenario]:
        fresh_asked.append(n)
        return train_scenarios(n, start=500 + 10 * len(fresh_asked))

    scripted_server.script = _first_free_move  # one policy, no sampling: every game of a group alike
    groups, played = await gather_step_groups(
        _StubModel(openai_client), config, train_scenarios(2), temperature=0.7, step=1, fresh=fresh
    )
    assert fresh_asked == [2, 2] and len(played) == 6  # two more rounds of 2 groups, none differed
    assert groups == played[:2] and not any(differs(g) for g in played)

    calls = iter(range(10_000))  # every third reply is unreadable: games of a group now differ
    scripted_server.script = lambda body: (
        {"content": "no idea"} if next(calls) % 3 == 2 else _first_free_move(body)
    )
    fresh_asked.clear()
    groups, played = await gather_step_groups(
        _StubModel(openai_client), config, train_scenarios(2), temperature=0.7, step=1, fresh=fresh
    )
    assert all(differs(g) for g in groups) and 1 <= len(groups) <= 2
    assert len(played) == 2 + sum(fresh_asked)  # fresh games only for the groups missing
    no_resampling = DemoConfig(group_size=4, groups_per_step=2)
    scripted_server.script = _first_free_move
    fresh_asked.clear()
    groups, played = await gather_step_groups(
        _StubModel(openai_client), no_resampling, train_scenarios(2), temperature=0.7, step=1, fresh=fresh
    )
    assert fresh_asked == [] and len(played) == 2 and groups == played


async def test_varied_opponents_give_each_game_of_a_group_its_own_opponent_on_the_same_opening(
    scripted_server: Any, openai_client: Any
) -> None:
    """With `vary_opponents`, a deterministic policy's games in one group meet different opponents (so they
    differ) from the same opening; without it they are one game played `group_size` times."""
    from art.examples.tic_tac_toe.env import opening
    from art.examples.tic_tac_toe.train import DemoConfig, gather_step_groups, group_game

    scenario = train_scenarios(3, max_opening_plies=4)[2]
    assert scenario.opening_plies == 4
    games = [group_game(scenario, i, True) for i in range(8)]
    assert len({g.opponent_seed for g in games}) == 8
    assert {tuple(opening(g)) for g in games} == {tuple(opening(scenario))}
    assert group_game(scenario, 3, False) is scenario
    replies = {Game(g).opponent.rng.random() for g in games}  # each game's opponent draws its own numbers
    assert len(replies) == 8

    scripted_server.script = _first_free_move  # one policy, no sampling
    boards: dict[bool, list[list[str]]] = {}
    for vary in (False, True):
        config = DemoConfig(group_size=8, groups_per_step=1, vary_opponents=vary)
        groups, _ = await gather_step_groups(
            _StubModel(openai_client), config, train_scenarios(1), temperature=0.7, step=1,
            fresh=lambda n: train_scenarios(n, start=900),
        )  # fmt: skip
        boards[vary] = [[str(m.get("content")) for m in t.messages()] for t in groups[0].trajectories]
    assert all(b == boards[False][0] for b in boards[False])  # shared opponent: one game 8 times
    assert len({tuple(b) for b in boards[True]}) > 1  # own opponents: the games differ


async def _two_groups_with_resampling(openai_client: Any, config: Any) -> tuple[list[Any], list[Any]]:
    """`gather_step_groups` on 2 training scenarios, fresh games numbered from 900 (the resampling tests)."""
    from art.examples.tic_tac_toe.train import gather_step_groups

    return await gather_step_groups(
        _StubModel(openai_client), config, train_scenarios(2), temperature=0.7, step=1,
        fresh=lambda n: train_scenarios(n, start=900),
    )  # fmt: skip


async def test_varied_resampled_opponents_fill_a_step_whose_shared_opponent_groups_all_played_alike(
    scripted_server: Any, openai_client: Any
) -> None:
    """With `vary_resampled_opponents`, the first round keeps each group's shared opponent (a deterministic
    policy plays one game 8 times), and only dynamic sampling's fresh games meet an opponent per game: so
    the step trains on those groups instead of being empty."""
    from art.examples.tic_tac_toe.train import DemoConfig, differs

    scripted_server.script = _first_free_move  # one policy, no sampling
    config = DemoConfig(group_size=8, groups_per_step=2, resample_rounds=2, vary_resampled_opponents=True)
    groups, played = await _two_groups_with_resampling(openai_client, config)
    first_round = played[:2]
    assert not any(map(differs, first_round))  # the shared opponent: each group one game 8 times
    assert groups and all(differs(g) for g in groups) and not any(g in first_round for g in groups)
    shared = DemoConfig(group_size=8, groups_per_step=2, resample_rounds=2)
    groups, played = await _two_groups_with_resampling(openai_client, shared)
    assert len(played) == 6 and not any(map(differs, played))  # without it: nothing to learn


def test_an_adaptive_opponent_grows_stronger_while_the_policy_wins_and_weaker_when_it_loses() -> None:
    """`max_opponent_skill` above `opponent_skill`: the training opponent's skill climbs one step per step
    won more than half of the time, up to the maximum, falls back when the policy wins under a quarter, and
    never goes below the configured start; without a maximum the opponent stays as configured."""
    from art.examples.tic_tac_toe.train import DemoConfig, next_opponent_skill

    config = DemoConfig(opponent_skill=0.5, max_opponent_skill=0.8, opponent_skill_step=0.1)
    skill, seen = 0.5, []
    for won in (0.9, 0.9, 0.9, 0.9, 0.4, 0.1, 0.1, 0.1, 0.1):
        skill = next_opponent_skill(config, skill, won)
        seen.append(skill)
    assert seen == [0.6, 0.7, 0.8, 0.8, 0.8, 0.7, 0.6, 0.5, 0.5]
    fixed = DemoConfig(opponent_skill=0.5)
    assert {next_opponent_skill(fixed, 0.5, won) for won in (0.0, 0.5, 1.0)} == {0.5}


async def test_a_maximum_opponent_skill_outside_0_to_1_is_refused_before_anything_runs(
    tmp_path: Path,
) -> None:
    from art.examples.tic_tac_toe.train import DemoConfig, run_demo

    with pytest.raises(ValueError, match=r"max_opponent_skill must be within \[0, 1\].*got 1.5"):
        await run_demo(DemoConfig(max_opponent_skill=1.5, base_path=str(tmp_path)), echo=lambda _: None)
    assert not any(tmp_path.iterdir())  # nothing registered, nothing written


def test_an_rl_step_trains_with_dr_grpo_advantages_only_when_scale_rewards_is_off() -> None:
    """`DemoConfig.scale_rewards=False` reaches the trainer as `_config={"scale_rewards": False}` (Dr. GRPO's
    `reward - group mean`), which the trainer resolves to unscaled advantages; the default sends no option,
    so the trainer's own default (scaled, as GRPO) holds."""
    from art.examples.tic_tac_toe.train import DemoConfig, rl_train_options

    from art.backends.train_options import resolve_train_kwargs
    from art.training.advantages import group_advantages

    plain = rl_train_options(DemoConfig(learning_rate=2e-4))
    assert plain == {"config": art.TrainConfig(learning_rate=2e-4)}
    dr_grpo = rl_train_options(DemoConfig(learning_rate=2e-4, scale_rewards=False))
    assert dr_grpo["config"] == art.TrainConfig(learning_rate=2e-4)
    spec = resolve_train_kwargs(dr_grpo["_config"]).spec
    assert spec.scale_rewards is False
    # Two lost games apart by one legal move (0.1): unscaled they weigh a tenth of a win against a loss.
    assert group_advantages([0.3, 0.2], scale_rewards=spec.scale_rewards) == pytest.approx([0.05, -0.05])
    assert group_advantages([1.0, 0.0], scale_rewards=spec.scale_rewards) == pytest.approx([0.5, -0.5])
    assert group_advantages([0.3, 0.2]) == pytest.approx(group_advantages([1.0, 0.0]), rel=1e-4)


def _first_free_move_or_forced(body: dict[str, Any]) -> dict[str, Any]:
    """`_first_free_move`, except that a `guided_choice` is answered with its one choice, as the server does."""
    if body.get("guided_choice"):
        return {"content": body["guided_choice"][0]}
    return _first_free_move(body)


async def test_branched_resampled_games_split_one_board_into_different_moves(
    scripted_server: Any, openai_client: Any
) -> None:
    """With `branch_resampled`, a step whose groups all played alike (a deterministic policy against a shared
    opponent) plays fresh groups whose games reach one board and there play different cells (forced through
    `guided_choice`, logged), so their rewards differ and the step trains on them; the first round is not
    branched, and a game is branched at the group's one turn only."""
    from art.examples.tic_tac_toe.rollout import branch_move
    from art.examples.tic_tac_toe.train import DemoConfig, branch_turn, differs

    scripted_server.script = _first_free_move_or_forced
    config = DemoConfig(group_size=8, groups_per_step=2, resample_rounds=2, branch_resampled=True)
    groups, played = await _two_groups_with_resampling(openai_client, config)
    first_round = played[:2]
    assert not any(map(differs, first_round))
    assert all("branch" not in line for g in first_round for t in g for line in t.logs)
    assert len(groups) == 2 and all(differs(g) for g in groups) and not any(g in first_round for g in groups)
    for group in groups:
        forced = [[line for line in t.logs if line.startswith("branch: ")] for t in group]
        assert all(len(lines) == 1 for lines in forced)  # one forced move a game, at the group's turn
        turns = {int(lines[0].split()[2]) for lines in forced}  # "branch: move N forced to C1"
        assert len(turns) == 1
        empty = 9 - 2 * (turns.pop() - 1)  # no opening: the agent moved, then the opponent, each turn before
        cells = [lines[0].split()[-1] for lines in forced]
        assert len(set(cells)) == min(8, empty)  # one board: as many different cells as it has, up to 8
    scenario = train_scenarios(1, start=900)[0]
    assert 0 <= branch_turn(scenario) < 3 and branch_turn(scenario) == branch_turn(scenario)
    board = Board()
    assert sorted(branch_move(scenario, board, 0, i) for i in range(9)) == sorted(board.legal_moves())
