"""Train a model to play tic-tac-toe against a seeded random opponent; this is what `art demo` runs.

    python -m art.examples.tic_tac_toe.train                 # or: art demo (a warm start, then RL)
    python -m art.examples.tic_tac_toe.train --rl-only       # or: art demo --rl-only

`art demo`'s default is a warm start (`WARM_START`): step 1 fine-tunes on 96 games of a perfect minimax
teacher (supervised), then 7 RL steps continue on the same adapter at 5e-5, and the checkpoint reported is
the best of steps 1, 4 and 8 on 32 validation games. On 2 CPU cores (AVX-512 BF16) that reached 75.0-84.4%
held-out wins with 0-6.2% illegal moves on 3 of 3 seeds in 7.9-8.5 minutes, where 8 steps of RL alone
reached 39.1% with 56-58% of the games forfeited by an illegal move in 4.9-5.6 minutes (benchmarks/README.md,
"The demo's default"): a 135M model writes an illegal move in about 85% of its games, and RL alone spends its
steps learning the move format from the few games it happens to play well. `--rl-only` runs RL alone
(`DemoConfig()`'s defaults).

Each step plays `groups_per_step` training games `group_size` times each (one group per game: the same
opponent seed, different samples from the model), trains one GRPO step on them, and every `eval_every`
steps plays the held-out games. The end is a table: base model vs trained adapter on the same held-out
games, and a PNG plot of reward and win rate per step (`plots/history.png`, the plot `art plot` draws).

With an SFT warm-up (`art demo --sft-warmup`, `DemoConfig.sft_warmup()`), step 1 is supervised fine-tuning
on games of a perfect minimax teacher (`distill.py`), written to a JSONL file in the model's folder and
trained with `art.utils.sft.train_sft_from_file`; RL then continues on the same adapter, at a third of the
demo's learning rate (`SFT_THEN_RL_LEARNING_RATE`: RL at the demo's rate drifted from the SFT policy). A time budget
(`time_budget_minutes`) bounds the time spent training (held-out evaluations not counted): an SFT round
starts only if one as long as the last still ends within it, an RL step only if its worst case (`StepClock`)
and a round of validation games do;
with `steps=0` and a budget, SFT rounds on fresh teacher games fill it instead (the "SFT only" arm of
`benchmarks/learning.py --sft-warmup`).

Checkpoint selection (`select_games`, on in `--sft-warmup`): every `eval_every` steps (and after each SFT
round) the checkpoint plays `select_games` validation games, which are neither trained on nor among the
held-out games, and the run reports the checkpoint that scored best on them, the way the reference's
`model.delete_checkpoints()` keeps the best by a validation metric. RL from a good policy can drift late;
the held-out table then measures the best checkpoint, on games that played no part in choosing it. These
validations are part of training and count toward the time budget.

Signal (options, off by default: benchmarks/README.md, "RL alone", has what they did): once the policy
beats the random opponent, most groups are won (or lost) by every game alike and teach GRPO nothing. These
options keep a step's groups informative: the training games' opponent takes a win or blocks one at a share
of its moves (`opponent_skill`; held-out and validation games keep the random opponent), a share that grows
while the policy wins (`max_opponent_skill`, `next_opponent_skill`), training games
start after up to `max_opening_plies` random moves (positions a fixed opening line never reaches), and a step whose
games left fewer groups with different rewards than it trains plays fresh games for the missing ones, up
to `resample_rounds` more rounds (DAPO's dynamic sampling, `gather_step_groups`).

Exploration: the training rollouts start at `temperature` and run hotter, one `temperature_step` per round,
while no group's games got different rewards (a policy sharpened by SFT can play every game of a group
alike, and GRPO then has nothing to learn from); each round that trained cools them again by a step
(`next_temperature`). Held-out and validation games always play at `temperature`.
"""

from __future__ import annotations

import asyncio
import dataclasses
import random
import shlex
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from art.examples.tic_tac_toe.distill import teacher_games, write_sft_file
from art.examples.tic_tac_toe.env import (
    TicTacToeScenario,
    selection_scenarios,
    train_scenarios,
    val_scenarios,
)
from art.examples.tic_tac_toe.rollout import TicTacToeConfig, rollout

import art
from art.record.plots import plot_history
from art.utils.sft import train_sft_from_file

# What `--sft-warmup` changes: its own model folder, a warm-up on minimax-teacher games, RL after it at a
# third of the demo's learning rate (1.5e-4 drifted from the good SFT policy; 5e-5 kept improving on it:
# benchmarks/README.md, "RL at 5e-5 after SFT"), for as many steps as 30 minutes of training allow: the
# recipe measured by `benchmarks/learning.py --sft-warmup` (issue 25's goal).
SFT_THEN_RL_LEARNING_RATE = 5e-5
SFT_WARMUP: dict[str, object] = {
    "name": "tic-tac-toe-sft",
    "sft_games": 96,
    "select_games": 32,
    "learning_rate": SFT_THEN_RL_LEARNING_RATE,
    "steps": 1000,  # an upper bound: the budget ends the run
    "time_budget_minutes": 30.0,
}

# RL alone for 30 minutes of training (`benchmarks/learning.py`'s "RL only" arm; issue 55 item 2): twice the
# demo's rate, training games against an opponent that starts at half skill and grows stronger while the
# policy wins, half of them after a random opening of 2 or 4 plies, and up to 2 rounds of fresh games while
# fewer groups than a step trains got different rewards (benchmarks/README.md, "RL alone: an opponent that
# stays hard"). Held-out and validation games keep the random opponent and the empty board.
RL_ALONE: dict[str, object] = {
    "learning_rate": 3e-4,
    "opponent_skill": 0.5,
    "max_opponent_skill": 1.0,
    "max_opening_plies": 4,
    "resample_rounds": 2,
}

# What `art demo` runs by default: the warm start (see the module docstring). Its RL steps train 2 groups,
# not 3: after SFT most groups are won by every game and teach nothing, and the smaller step saves about a
# minute of the 2-3 the SFT step adds (benchmarks/README.md, "The demo's default").
WARM_START: dict[str, object] = {
    "sft_games": 96,
    "learning_rate": SFT_THEN_RL_LEARNING_RATE,
    "steps": 7,  # RL steps after the SFT step: 8 checkpoints in all
    "groups_per_step": 2,
    "eval_after_sft": False,
    # The reported checkpoint is the best of steps 1, 4 and 8 on 32 validation games (not the held-out
    # ones): a few RL steps on 2 groups can drift from a good SFT policy (seed 1 went from 73.4% wins and
    # 6.2% illegal after SFT to 64.1% and 15.6% after RL without it).
    "select_games": 32,
    "eval_every": 4,
}
RL_ONLY_NAME = "tic-tac-toe-rl"
"""`art demo --rl-only`'s model name: its record is kept apart from the warm start's."""

SELECT_SPLIT = "select"
"""The history split of the validation games that pick the checkpoint (`select/reward`, `select/win`)."""


@dataclass
class DemoConfig:
    """Hyper-parameters of a tic-tac-toe run. Its defaults are RL alone (`art demo --rl-only`, about 5-6
    minutes on 2 CPU cores); `demo_config()` gives `art demo`'s default, the warm start (`WARM_START`)."""

    base_model: str = "smollm2-135m"
    project: str = "demo"
    name: str = "tic-tac-toe"
    base_path: str = ".art"
    steps: int = 8
    group_size: int = 8
    groups_per_step: int = 3
    val_games: int = 64
    eval_every: int = 4
    learning_rate: float = 1.5e-4
    # 0.7 rather than 1.0: a 135M model at temperature 1 writes mostly unparseable moves, and groups in
    # which every game is an immediate forfeit teach nothing.
    temperature: float = 0.7
    # Exploration: a rollout round in which no group got different rewards raises the training rollouts'
    # temperature by `temperature_step`, up to `max_temperature`; a round that trained lowers it by one
    # step, never below `temperature` (see `next_temperature`). Held-out and validation games always play
    # at `temperature`. 0: a fixed temperature.
    temperature_step: float = 0.1
    max_temperature: float = 1.5
    max_tokens: int = 12
    seed: int = 0
    # Training games' opponent: the chance per move that it takes a win or blocks one (`env.Opponent`; 0: the
    # random opponent that held-out and validation games always play).
    opponent_skill: float = 0.0
    # Training games that start in the middle: up to this many random plies (0, 2 or 4; by seed, each
    # count equally often) on the board before the agent's first move (`env.opening`); held-out and
    # validation games always start on an empty board. 0: every game starts empty.
    max_opening_plies: int = 0
    # Dynamic sampling (DAPO's): a step whose games left fewer than `groups_per_step` groups with different
    # rewards plays fresh games, up to `resample_rounds` more rounds, and trains on the groups that differ
    # (see `gather_step_groups`); 0: a step trains on the groups of its one round.
    resample_rounds: int = 0
    # Each game of a group meets an opponent of its own (`TicTacToeScenario.opponent_seed`; same opening,
    # same skill), so a near-deterministic policy's games still differ and teach how it answers other
    # replies; False: the group's games share the scenario's opponent and differ only by the policy.
    # Measured off: in a 30-minute RL-only run every group differed, yet the opponent's luck swamped the
    # policy's signal (50.0% held-out wins against 73-77% shared; benchmarks/README.md).
    vary_opponents: bool = False
    # Only the games dynamic sampling adds (`resample_rounds`) meet an opponent per game, so a step whose
    # shared-opponent groups all played alike still has something to learn; the first round keeps the
    # shared opponent, and the exploration temperature follows its groups alone (`next_temperature`).
    # Measured off: no step was empty, yet seed 2 of the RL-alone recipe reached 78.1% held-out wins (76.6%
    # without it) with validation 12 points lower: the same luck, credited to the policy (benchmarks/README.md).
    vary_resampled_opponents: bool = False
    # Only the games dynamic sampling adds (`resample_rounds`) branch: in each, the agent's move at one turn
    # (drawn per group from its first 3 by the scenario's seed, the same for the group's games) is forced to
    # a different empty cell per game (`rollout`'s `branch`), so a step whose groups all played alike
    # compares moves the policy would not sample at a board it reaches. The forced moves train as sampled
    # ones (their logprobs are the policy's; no importance correction for the forcing). Measured off: seed 2 of
    # the RL-alone recipe, no empty step, yet 78.1% held-out wins (76.6% without; benchmarks/README.md).
    branch_resampled: bool = False
    # An opponent that stays hard: above `opponent_skill`, up to this skill, the training games' opponent
    # gets `opponent_skill_step` stronger after a step whose games the policy won more than half of, and as
    # much weaker after one it won less than a quarter of (`next_opponent_skill`). 0: a fixed opponent.
    max_opponent_skill: float = 0.0
    opponent_skill_step: float = 0.1
    # GRPO's advantages divided by each group's reward spread (True, the trainer's default), or Dr. GRPO's
    # plain `reward - group mean` (False): a group whose games differ only by the reward's small
    # legal-move term (0.1 a move in a lost game) then moves the policy a tenth as much as one that
    # separates wins from losses, where scaled it moves it as much. Measured on (the default): seed 2 of the
    # RL-alone recipe reached 79.7% held-out wins with 4.7% illegal unscaled, 76.6% with 0% scaled, within a
    # standard error, validation lower at most steps (benchmarks/README.md).
    scale_rewards: bool = True
    # SFT warm-up: `sft_games` minimax-teacher games, `sft_epochs` passes in one train_sft call (0: RL only).
    sft_games: int = 0
    sft_epochs: int = 2
    sft_batch_size: int = 8
    sft_learning_rate: float = 3e-4
    eval_after_sft: bool = True  # play the held-out games after the warm-up too (when RL follows)
    # Validation games that pick the reported checkpoint (0: report the last one); see the module docstring.
    select_games: int = 0
    # Training time (teacher games, SFT, rollouts, RL steps) to stay within: no step or SFT round starts
    # that would end past it, judged by the last one's duration; 0: no budget.
    time_budget_minutes: float = 0.0
    evaluate_base: bool = True  # False: skip the base model's games (a benchmark measures them once)
    task: TicTacToeConfig = field(default_factory=TicTacToeConfig)

    @classmethod
    def quick(cls, **overrides: object) -> DemoConfig:
        """A smoke run of about two minutes: two small steps and a few held-out games."""
        values: dict[str, object] = {
            "steps": 2,
            "group_size": 4,
            "groups_per_step": 2,
            "val_games": 8,
            "eval_every": 1,
        }
        values.update(overrides)
        return cls(**values)  # type: ignore[arg-type]

    @classmethod
    def sft_warmup(cls, **overrides: object) -> DemoConfig:
        """SFT on minimax-teacher games first, then RL on the same adapter (`art demo --sft-warmup`)."""
        return cls(**{**SFT_WARMUP, **overrides})  # type: ignore[arg-type]


@dataclass
class EvalResult:
    """Outcome rates of a model on a set of held-out games."""

    model: str
    games: int
    win: float
    draw: float
    loss: float
    illegal: float
    reward: float


@dataclass
class DemoResult:
    """What a demo run produced: evaluations, where the record and plot are, and how long it took."""

    base: EvalResult | None  # None when `evaluate_base` was off
    trained: EvalResult
    final_step: int
    history_path: Path
    plot_path: Path
    seconds: float
    evals: list[tuple[int, EvalResult]] = field(default_factory=list)
    train_seconds: float = 0.0  # training (teacher games, SFT, rollouts, RL steps, validations), not held-out
    sft_steps: int = 0  # checkpoints made by supervised fine-tuning
    reported_step: int = 0  # the checkpoint `trained` measures: the last, or the best on validation games
    selection: list[tuple[int, EvalResult]] = field(default_factory=list)  # (step, on validation games)


def summarize(model_name: str, trajectories: Sequence[art.Trajectory]) -> EvalResult:
    """Win/draw/loss/illegal rates and mean reward of finished games."""
    n = max(len(trajectories), 1)

    def rate(key: str) -> float:
        return sum(float(t.metrics.get(key, 0.0)) for t in trajectories) / n

    return EvalResult(
        model=model_name,
        games=len(trajectories),
        win=rate("win"),
        draw=rate("draw"),
        loss=rate("loss"),
        illegal=rate("illegal"),
        reward=sum(t.reward for t in trajectories) / n,
    )


async def evaluate(
    model: art.TrainableModel,
    model_name: str,
    games: Sequence[TicTacToeScenario],
    config: DemoConfig,
    desc: str,
) -> tuple[EvalResult, list[art.Trajectory]]:
    """Play every held-out game once with `model_name` (base name or `{name}@{step}`).

    Sampling is seeded per game and move (`rollout(sample_seed=...)`): the numbers are reproducible, and
    the base model and each checkpoint meet the same random draws, so their difference is not sampling luck
    of one evaluation (unseeded, the base model's win rate on the same 32 games ranged 3-25% across runs).
    """
    client = model.openai_client()
    groups = await art.gather_trajectory_groups(
        [
            art.TrajectoryGroup(
                [
                    rollout(
                        client,
                        model_name,
                        game,
                        config=config.task,
                        temperature=config.temperature,
                        max_tokens=config.max_tokens,
                        sample_seed=game.seed * 100,
                    )
                ]
            )
            for game in games
        ],
        pbar_desc=desc,
        pbar_leave=False,
        max_exceptions=0,
    )
    trajectories = [t for g in groups for t in g.trajectories]
    return summarize(model_name, trajectories), trajectories


TABLE_LEGEND = (
    "win + draw + loss = 100% of games. 'illegal' counts games forfeited by an illegal or unreadable move;\n"
    "those are losses too, so 'illegal' is part of 'loss'. reward: 1 win, 0.5 draw, 0 loss, plus 0.1 per\n"
    "legal move in a lost game (so an illegal move late beats one on the first move)."
)
"""Printed under the final table (what its columns mean)."""


def format_table(rows: Sequence[EvalResult]) -> str:
    """A plain-text table of evaluations (one row per model)."""
    header = f"{'model':<28} {'games':>5} {'win':>6} {'draw':>6} {'loss':>6} {'illegal':>8} {'reward':>7}"
    lines = [header, "-" * len(header)]
    for r in rows:
        lines.append(
            f"{r.model:<28} {r.games:>5} {r.win:>6.1%} {r.draw:>6.1%} {r.loss:>6.1%} {r.illegal:>8.1%} {r.reward:>7.3f}"
        )
    return "\n".join(lines)


TEACHER_ROUNDS_PER_SEED = 1000
"""Teacher-game rounds a seed may use before its games would overlap the next seed's."""


async def sft_round(
    model: art.TrainableModel, config: DemoConfig, round_index: int, echo: Callable[[str], None]
) -> tuple[art.TrainResult, float]:
    """One SFT checkpoint: `config.sft_games` fresh minimax-teacher games, written to the model's folder as
    JSONL and trained from that file. Returns the result and the training's seconds per sequence."""
    start = (
        config.seed * TEACHER_ROUNDS_PER_SEED + round_index
    ) * config.sft_games  # each seed its own games
    games = teacher_games(config.sft_games, start=start, config=config.task)
    path = write_sft_file(games, model.storage.root / "sft" / f"teacher-{round_index}.jsonl")
    t = time.perf_counter()
    result = await train_sft_from_file(
        model,
        str(path),
        epochs=config.sft_epochs,
        batch_size=config.sft_batch_size,
        peak_lr=config.sft_learning_rate,
        schedule_type="constant",  # after a 10% warmup: a short warm-up has no batches to waste on decay
        seed=config.seed,
    )
    sequences = sum(m.get("num_trajectories", 0.0) for m in result.batch_metrics)
    sequence_s = (time.perf_counter() - t) / max(sequences, 1.0)
    losses = [m["loss"] for m in result.batch_metrics if "loss" in m]
    echo(
        f"SFT on {len(games)} teacher games ({path.name}, {config.sft_epochs} epoch(s)): step {result.step}, "
        f"loss {losses[0]:.3f} -> {losses[-1]:.3f} over {len(losses)} batches"
    )
    return result, sequence_s


def describe(result: EvalResult) -> str:
    """One line: the outcome rates and mean reward of an evaluation."""
    return (
        f"win {result.win:.1%}, draw {result.draw:.1%}, loss {result.loss:.1%} "
        f"(illegal moves {result.illegal:.1%}), reward {result.reward:.3f}"
    )


def step_header(validation: bool = False) -> str:
    """The columns of the line printed after each training step; the win column is on the validation
    games when they pick the checkpoint, else on the held-out games."""
    win = "val win" if validation else "held-out win"
    return f"{'step':>4}  {'train reward':>12}  {'temp':>4}  {'trained on':>10}  {win:>12}  {'seconds':>7}"


STEP_HEADER = step_header()
"""The step line's columns without checkpoint selection."""


def plan_line(config: DemoConfig) -> str:
    """What the run will do, in one line: SFT warm-up, RL steps, budget, held-out games."""
    budget = f" within {config.time_budget_minutes:g} min of training" if config.time_budget_minutes else ""
    count = f"RL steps (up to {config.steps}{budget})" if budget else f"{config.steps} RL steps"
    rl = (
        f"{count}; each plays {config.groups_per_step} games "
        f"{config.group_size} times (a group per game), then trains the LoRA adapter once "
        f"(learning rate {config.learning_rate:g})"
    )
    if config.sft_games:
        sft = f"SFT on {config.sft_games} minimax-teacher games ({config.sft_epochs} epoch(s))"
        if config.steps:
            plan = f"{sft} as step 1, then {rl}"
        elif config.time_budget_minutes:
            plan = f"{sft} per round, rounds on fresh games{budget}; no RL"
        else:
            plan = f"{sft}; no RL"
    else:
        plan = rl[0].upper() + rl[1:]
    evals = (
        f"before training and every {config.eval_every} steps"
        if config.eval_every < max(config.steps, 1) and not config.select_games
        else "before and after training"
    )
    if not config.evaluate_base:
        evals = evals.replace("before training and every", "every").replace("before and after", "after")
    line = f"{plan}. Held-out: {config.val_games} games {evals}."
    if config.select_games:
        every = f"every {config.eval_every} steps" if config.steps else "each round"
        line += (
            f" The reported checkpoint is the best on {config.select_games} other validation games, "
            f"played {every}."
        )
    return line


def best_checkpoint(selection: Sequence[tuple[int, EvalResult]]) -> int:
    """The step with the highest mean reward on the validation games; the later step on a tie (it trained
    more for the same score)."""
    if not selection:
        raise ValueError("no checkpoint was validated: set select_games and evaluate at least one step")
    return max(selection, key=lambda item: (item[1].reward, item[0]))[0]


def next_temperature(config: DemoConfig, current: float, trainable: int) -> float:
    """The training rollouts' temperature for the next round, from how many of this round's groups were
    `trainable` (got different rewards).

    A policy made confident by SFT can play every game of a group the same way at the demo's temperature
    (0.7): then no group is trainable and RL stops learning while the rounds go on (seed 2 of the 30-minute
    SFT-then-RL benchmark: 66 rounds in a row). No trainable group: one `temperature_step` hotter, up to
    `max_temperature`; a round that trained: one step cooler, not below `temperature`. So the temperature
    stays at `temperature` while rounds train, and otherwise settles where about every other round does:
    hot enough to find a better move, no hotter (training at a high temperature spends the step on
    mistakes the policy would not make at `temperature`; a first version that cooled only when every
    group trained climbed to 1.4 and stalled seed 0's validation wins at 84%).

    With dynamic sampling (`resample_rounds`), a step that could not fill its `groups_per_step` groups
    with groups that differ counts as not trained: RL alone sharpens the policy until it plays most games
    of a group alike, and then found one differing group in 7-9 played at 0.7-0.9, where the rule above
    kept it (seed 0 of `benchmarks/learning.py --arms "RL only"`, steps 35-79).
    """
    if not config.temperature_step:
        return config.temperature
    short = trainable < config.groups_per_step if config.resample_rounds else trainable == 0
    if short:
        return min(
            round(current + config.temperature_step, 6), max(config.max_temperature, config.temperature)
        )
    return max(round(current - config.temperature_step, 6), config.temperature)


OPPONENT_HARDER_ABOVE = 0.5
"""The share of a step's training games won above which the next step's opponent gets stronger."""
OPPONENT_EASIER_BELOW = 0.25
"""... and below which it gets weaker (never below `DemoConfig.opponent_skill`)."""


def next_opponent_skill(config: DemoConfig, current: float, win_rate: float) -> float:
    """The training games' opponent skill for the next step, from the share of this step's games won.

    Once RL alone beats the random opponent, a group's games are all won alike and teach GRPO nothing (127
    of 220 steps trained nothing in a 30-minute run). An opponent that takes a win or blocks one more often
    as the policy wins keeps the games undecided: `opponent_skill_step` stronger after a step won more than
    `OPPONENT_HARDER_ABOVE` of the time, up to `max_opponent_skill`; as much weaker after one won less than
    `OPPONENT_EASIER_BELOW`, down to `opponent_skill`; else unchanged. Off (the skill fixed) while
    `max_opponent_skill` is not above `opponent_skill`.

        >>> config = DemoConfig(opponent_skill=0.5, max_opponent_skill=1.0)
        >>> next_opponent_skill(config, 0.5, 0.8), next_opponent_skill(config, 1.0, 0.9)
        (0.6, 1.0)
        >>> next_opponent_skill(config, 0.7, 0.1), next_opponent_skill(config, 0.5, 0.1)
        (0.6, 0.5)
        >>> next_opponent_skill(DemoConfig(opponent_skill=0.5), 0.5, 0.9)
        0.5
    """
    if config.max_opponent_skill <= config.opponent_skill:
        return config.opponent_skill
    if win_rate > OPPONENT_HARDER_ABOVE:
        return min(round(current + config.opponent_skill_step, 6), config.max_opponent_skill)
    if win_rate < OPPONENT_EASIER_BELOW:
        return max(round(current - config.opponent_skill_step, 6), config.opponent_skill)
    return current


def differs(group: art.TrajectoryGroup) -> bool:
    """Whether a group's games got different rewards (the only groups GRPO learns from)."""
    rewards = [t.reward for t in group.trajectories]
    return len(rewards) > 1 and max(rewards) > min(rewards)


RESAMPLE_SEED_OFFSET = 50_000
"""Where a seed's resampled games start, past its regular training games (`train_scenarios`' `start`)."""


def group_game(scenario: TicTacToeScenario, index: int, vary_opponent: bool) -> TicTacToeScenario:
    """The scenario the `index`-th game of a group plays: the group's own, or (`vary_opponent`) the same
    opening against an opponent seeded for that game."""
    if not vary_opponent:
        return scenario
    return dataclasses.replace(scenario, opponent_seed=f"{scenario.seed}/{index}")


def branch_turn(scenario: TicTacToeScenario, turns: int = 3) -> int:
    """The agent's turn (0-based, one of its first `turns`) at which a branched group's games split."""
    return random.Random(f"branch-turn-{scenario.seed}").randrange(turns)


async def gather_step_groups(
    model: art.TrainableModel,
    config: DemoConfig,
    scenarios: Sequence[TicTacToeScenario],
    *,
    temperature: float,
    step: int,
    fresh: Callable[[int], list[TicTacToeScenario]],
) -> tuple[list[art.TrajectoryGroup], list[art.TrajectoryGroup]]:
    """Play one group per scenario, then, while fewer than `len(scenarios)` groups differ and
    `config.resample_rounds` allow, a round of `fresh(n)` games for the groups missing (dynamic sampling).

    Returns the groups to train on (those that differ, up to `len(scenarios)`, in the order played; the
    first round's groups when none differs, so the step records what was played) and every group played.
    """
    name = model.get_inference_name()

    async def play(batch: Sequence[TicTacToeScenario], round_index: int) -> list[art.TrajectoryGroup]:
        suffix = f" (resampled {round_index})" if round_index else ""
        return await art.gather_trajectory_groups(
            (
                art.TrajectoryGroup(
                    rollout(
                        model.openai_client(),
                        name,
                        group_game(
                            scenario,
                            i,
                            config.vary_opponents or (round_index > 0 and config.vary_resampled_opponents),
                        ),
                        config=config.task,
                        temperature=temperature,
                        max_tokens=config.max_tokens,
                        branch=(branch_turn(scenario), i)
                        if round_index and config.branch_resampled
                        else None,
                    )
                    for i in range(config.group_size)
                )
                for scenario in batch
            ),
            pbar_desc=f"step {step}: rollouts{suffix}",
            pbar_leave=False,
            max_exceptions=0.1,
        )

    first = await play(scenarios, 0)
    played = list(first)
    keep = [g for g in first if differs(g)]
    for round_index in range(1, config.resample_rounds + 1):
        missing = len(scenarios) - len(keep)
        if missing <= 0:
            break
        more = await play(fresh(missing), round_index)
        played += more
        keep += [g for g in more if differs(g)]
    return (keep[: len(scenarios)] or first), played


def rl_train_options(config: DemoConfig) -> dict[str, Any]:
    """`model.train`'s keyword arguments for one RL step: the learning rate, and Dr. GRPO's unscaled
    advantages (`_config={"scale_rewards": False}`) when `config.scale_rewards` is off."""
    options: dict[str, Any] = {"config": art.TrainConfig(learning_rate=config.learning_rate)}
    if not config.scale_rewards:
        options["_config"] = {"scale_rewards": False}
    return options


def fits_budget(budget_s: float, spent_s: float, next_s: float) -> bool:
    """Whether one more piece of training expected to take `next_s` seconds still ends within `budget_s`
    seconds when `spent_s` are spent already; always True without a budget (0)."""
    return not budget_s or (spent_s < budget_s and spent_s + next_s <= budget_s)


RECENT_STEPS = 5  # how many recent RL steps a `StepClock` looks back on

RL_OVER_SFT_SECONDS = 1.5
"""An RL step's training seconds per sequence over SFT's, for guessing the first RL step: measured 1.1-1.4
on the AVX2 host (SFT: 20-30 s a batch of 8 games; RL: 27-35 s a group of 8, on the same days), with a
margin. In 3 seeds at 30 minutes it guessed 128-163 s for first steps that took 65-91 s."""


@dataclass
class StepClock:
    """How long the next RL step may take, from the recent ones: the time budget starts a step only if its
    worst case still fits.

    A step's time is its rollouts plus its training, and training grows with the number of groups whose
    games got different rewards (on the AVX2 host: ~12 s of rollouts, then ~25-35 s per trainable group;
    a round with none trains nothing). Which groups will differ is known only after the rollouts, so the
    worst case counts every group as trainable, at the slowest seconds per group of the recent steps.
    Expecting the last round's time overran the 30-minute budget by 12 s (a 9 s round that trained
    nothing came before), expecting the longest recent step's by 18 s and 6 s (the last step trained 2
    groups where the recent ones had trained 1).

    Before any RL step the worst case is a guess from the warm-up (`guess_from_warmup`): every game at the
    pace of the validation games, every group trained at `RL_OVER_SFT_SECONDS` times SFT's seconds per
    sequence, until steps (and steps that trained) are measured. With no SFT or no validation there is
    nothing to guess from, and the first step starts whenever time is left (that overran a 10-minute budget
    by 18 s).
    """

    rollouts_s: deque[float] = field(default_factory=lambda: deque(maxlen=RECENT_STEPS))
    per_group_s: deque[float] = field(default_factory=lambda: deque(maxlen=RECENT_STEPS))
    game_s: float = 0.0  # seconds per game played, from the validation games (0: unknown)
    sft_sequence_s: float = 0.0  # SFT's training seconds per sequence (0: no SFT)
    group_size: int = 0  # games per group, for the guess

    def guess_from_warmup(self, *, game_s: float, sft_sequence_s: float, group_size: int) -> None:
        """Set what the first step's worst case is guessed from: seconds per validation game, SFT's seconds
        per trained sequence, and games per group."""
        self.game_s, self.sft_sequence_s, self.group_size = game_s, sft_sequence_s, group_size

    def record(self, rollouts_s: float, training_s: float, trainable: int) -> None:
        """Add a finished step: its rollouts' and its training's seconds, and how many groups trained."""
        self.rollouts_s.append(rollouts_s)
        if trainable:
            self.per_group_s.append(training_s / trainable)

    def worst_step_s(self, groups: int) -> float:
        """The longest the next step may take when all of its `groups` groups train. Before any step (or
        any step that trained) the warm-up's guess stands in (0 without one: the first RL step starts
        whenever time is left)."""
        rollouts_s = max(self.rollouts_s, default=groups * self.group_size * self.game_s)
        per_group_s = max(
            self.per_group_s, default=self.group_size * self.sft_sequence_s * RL_OVER_SFT_SECONDS
        )
        return rollouts_s + groups * per_group_s


async def run_demo(
    config: DemoConfig,
    *,
    backend: art.Backend | None = None,
    echo: Callable[[str], None] = print,
) -> DemoResult:
    """Register the model, measure the base model, train, evaluate, plot, and print the final table.

    The output reads as a story: one line per finished phase (loading, the base model's held-out games,
    then one line per training step, numbered as the checkpoint it creates), the progress bars of each
    phase cleared when it ends, and at the end the table of base vs trained on the same held-out games with
    a legend, and where the history and the plot are.
    """
    from art.local import LocalBackend

    if not 0.0 <= config.max_opponent_skill <= 1.0:
        raise ValueError(
            f"max_opponent_skill must be within [0, 1] (0: a fixed opponent), got {config.max_opponent_skill}"
        )
    started = time.perf_counter()
    model = art.TrainableModel(
        name=config.name, project=config.project, base_model=config.base_model, base_path=config.base_path
    )
    own_backend = backend is None
    backend = backend or LocalBackend()
    try:
        echo(f"ART demo: {config.base_model} learns to play tic-tac-toe against a random opponent.")
        echo(plan_line(config))
        echo(
            f"Loading {config.base_model} and starting its server (the first run on a machine also builds "
            "compiled kernels; that can take a few minutes)..."
        )
        t = time.perf_counter()
        await model.register(backend)
        first_step = await model.get_step()
        resumed = f", resuming from step {first_step}" if first_step else ""
        echo(f"  ready in {time.perf_counter() - t:.0f} s{resumed}.")
        val = val_scenarios(config.val_games)
        evals: list[tuple[int, EvalResult]] = []
        base = None
        if config.evaluate_base:
            t = time.perf_counter()
            base, base_trajs = await evaluate(
                model, config.base_model, val, config, "held-out games, base model"
            )
            echo(f"Held-out games, base model ({time.perf_counter() - t:.0f} s): {describe(base)}")
            if first_step == 0:  # checkpoint 0 is the untrained adapter: the base model's games are step 0's
                await model.log(base_trajs, split="val", step=0)
                evals.append((0, base))

        budget_s = config.time_budget_minutes * 60
        train_s = 0.0  # time spent training (and validating, with selection), not on held-out games
        select_games = selection_scenarios(config.select_games)
        selection: list[tuple[int, EvalResult]] = []
        select_s = 0.0  # the longest validation so far: the budget keeps room for one more
        game_s = 0.0  # seconds per game of a checkpoint's evaluation: guesses the first RL step's rollouts
        sft_sequence_s = 0.0  # SFT's training seconds per sequence: guesses the first RL step's training

        async def validate(step: int) -> EvalResult:
            """Play the validation games with checkpoint `step`; logged as the `select` split."""
            nonlocal train_s, select_s, game_s
            t = time.perf_counter()
            result, trajs = await evaluate(
                model, model.get_inference_name(step), select_games, config, f"step {step}: validation games"
            )
            await model.log(trajs, split=SELECT_SPLIT, step=step)
            selection.append((step, result))
            took = time.perf_counter() - t
            select_s = max(select_s, took)
            game_s = max(game_s, took / max(len(select_games), 1))
            train_s += took
            return result

        sft_steps = 1 if config.sft_games else 0  # the warm-up is step 1; RL steps follow
        if config.sft_games and first_step == 0:
            rounds, round_s = 0, 0.0
            while rounds == 0 or (
                config.steps == 0 and budget_s and fits_budget(budget_s, train_s, round_s + select_s)
            ):
                t0 = time.perf_counter()
                _, sft_sequence_s = await sft_round(model, config, rounds, echo)
                round_s = time.perf_counter() - t0
                train_s += round_s
                rounds += 1
                if select_games:
                    step = await model.get_step()
                    echo(f"  validation games after SFT (step {step}): {describe(await validate(step))}")
            sft_steps = rounds
            step = await model.get_step()
            if config.steps and config.eval_after_sft:  # with RL to follow, show what the warm-up alone did
                t = time.perf_counter()
                evaluation, trajs = await evaluate(
                    model, model.get_inference_name(step), val, config, "after SFT"
                )
                await model.log(trajs, split="val", step=step)
                evals.append((step, evaluation))
                game_s = game_s or (time.perf_counter() - t) / max(len(val), 1)
                echo(f"Held-out games after SFT (step {step}): {describe(evaluation)}")

        scenarios = train_scenarios(
            config.steps * config.groups_per_step,
            start=config.seed * 100_000,
            opponent_skill=config.opponent_skill,
            max_opening_plies=config.max_opening_plies,
        )
        resampled = 0  # fresh games played by dynamic sampling so far (`gather_step_groups`)
        skill = config.opponent_skill  # the training games' opponent (see `next_opponent_skill`)

        def fresh(n: int) -> list[TicTacToeScenario]:
            nonlocal resampled
            start = config.seed * 100_000 + RESAMPLE_SEED_OFFSET + resampled
            resampled += n
            return train_scenarios(
                n, start=start, opponent_skill=skill, max_opening_plies=config.max_opening_plies
            )

        rl_done = max(await model.get_step() - sft_steps, 0)
        clock = StepClock()  # a step starts only if its worst case (plus a validation) fits the budget
        clock.guess_from_warmup(game_s=game_s, sft_sequence_s=sft_sequence_s, group_size=config.group_size)
        if config.steps and budget_s and clock.worst_step_s(config.groups_per_step):
            echo(
                f"  the budget guesses the first RL step at up to {clock.worst_step_s(config.groups_per_step):.0f} s "
                f"(games at the validation pace, training at {RL_OVER_SFT_SECONDS:g}x SFT's seconds per sequence)"
            )
        temperature = config.temperature  # the training rollouts' (see `next_temperature`)
        skipped_note_shown = False
        if config.steps:  # an SFT-only run has no RL table
            echo("")
            echo(step_header(bool(select_games)))
        for batch in art.iterate_dataset(
            scenarios, groups_per_step=config.groups_per_step, initial_step=rl_done, use_tqdm=False
        ):
            worst_s = clock.worst_step_s(config.groups_per_step)
            if not fits_budget(budget_s, train_s, worst_s + select_s):
                echo(
                    f"time budget of {config.time_budget_minutes:g} min: stopping after {train_s / 60:.1f} min "
                    f"of training (a step may take {worst_s:.0f} s, validation {select_s:.0f} s)"
                )
                break
            t0 = time.perf_counter()
            step = batch.step + 1  # the step (checkpoint) these rollouts train
            games = [dataclasses.replace(scenario, opponent_skill=skill) for scenario in batch.items]
            groups, played = await gather_step_groups(
                model, config, games, temperature=temperature, step=step, fresh=fresh
            )
            rollouts_s = time.perf_counter() - t0
            result = await model.train(groups, **rl_train_options(config))
            step_s = time.perf_counter() - t0
            train_s += step_s
            trainable = int(result.metrics.get("data/step_num_groups_trainable", 0))
            clock.record(rollouts_s, step_s - rollouts_s, trainable)
            if result.message and (trainable or not skipped_note_shown):  # the same note once is enough
                echo(f"  note: {result.message}")
                skipped_note_shown = skipped_note_shown or not trainable
            train_reward = sum(t.reward for g in played for t in g) / max(sum(len(g) for g in played), 1)
            trained_on = f"{trainable}/{len(played)} groups"
            val_cell = ""
            step = result.step
            is_last = batch.step + 1 >= config.steps or not fits_budget(
                budget_s, train_s, clock.worst_step_s(config.groups_per_step) + select_s
            )
            due = step % config.eval_every == 0 or is_last
            if due and select_games and step not in {s for s, _ in selection}:
                val_cell = f"{(await validate(step)).win:.1%}"
            elif due and not select_games and step not in {s for s, _ in evals}:
                evaluation, trajs = await evaluate(
                    model, model.get_inference_name(step), val, config, f"step {step}: held-out games"
                )
                await model.log(trajs, split="val", step=step)
                evals.append((step, evaluation))
                val_cell = f"{evaluation.win:.1%}"
            skipped = "" if trainable else "  (no step: nothing to learn)"
            adaptive = (
                f"  opponent skill {skill:.1f}" if config.max_opponent_skill > config.opponent_skill else ""
            )
            echo(
                f"{step:>4}  {train_reward:>12.3f}  {temperature:>4.2f}  {trained_on:>10}  {val_cell:>12}  "
                f"{time.perf_counter() - t0:>7.1f}{skipped}{adaptive}"
            )
            # With varied resampled opponents those groups fill the step; the temperature answers whether the
            # policy's own games (the first round's, against a shared opponent) still differ. Branched groups
            # explore by their forced moves, so the temperature follows the step's groups: it need not heat.
            explored = (
                sum(map(differs, played[: len(games)])) if config.vary_resampled_opponents else trainable
            )
            temperature = next_temperature(config, temperature, explored)
            games_played = [t for g in played for t in g]
            won = sum(t.metrics.get("win", 0.0) for t in games_played) / max(len(games_played), 1)
            skill = next_opponent_skill(config, skill, won)
        if config.steps:
            echo(
                "  (train reward: mean over the step's games; temp: their sampling temperature, raised while no "
                "group differs; trained on: groups whose games got different rewards, the only ones GRPO learns "
                "from"
                + (
                    f"; val win: wins in {config.select_games} validation games, not the held-out ones)"
                    if select_games
                    else ")"
                )
            )

        final_step = await model.get_step()
        reported = final_step
        if selection:
            reported = best_checkpoint(selection)
            chosen = dict(selection)[reported]
            echo(
                f"Best checkpoint on the {config.select_games} validation games: step {reported} "
                f"({describe(chosen)}), of {len(selection)} validated; the held-out games measure it."
            )
        done = dict(evals)
        if reported in done:
            trained = done[reported]
        else:
            trained, trajs = await evaluate(
                model, model.get_inference_name(reported), val, config, "held-out games, trained"
            )
            await model.log(trajs, split="val", step=reported)
            evals.append((reported, trained))
        trained = dataclasses.replace(trained, model=model.get_inference_name(reported))
        plot_path = model.storage.root / "plots" / "history.png"
        plot_history(
            model.history(), plot_path, title=f"{config.name}: {config.base_model} vs a random opponent"
        )
        echo("")
        echo(f"Held-out games ({config.val_games}, the same for both):")
        echo(format_table([r for r in (base, trained) if r is not None]))
        echo(TABLE_LEGEND)
        echo(f"history: {model.storage.history_path}")
        echo(f"plot:    {plot_path}  (or: art plot {model.storage.root})")
        for line in where_to_look(model):
            echo(line)
        echo(f"time:    {(time.perf_counter() - started) / 60:.1f} min")
        return DemoResult(
            base=base,
            trained=trained,
            final_step=final_step,
            history_path=model.storage.history_path,
            plot_path=plot_path,
            seconds=time.perf_counter() - started,
            evals=evals,
            train_seconds=train_s,
            sft_steps=sft_steps,
            reported_step=reported,
            selection=selection,
        )
    finally:
        if model.inference_base_url is not None:  # else a later event loop closes it, on a closed socket
            await model.openai_client().close()
        if own_backend:
            await backend.close()


def where_to_look(model: art.TrainableModel) -> list[str]:
    """The run's closing lines: where its record is, and the exact `art ui` and `art show` command lines that
    open it (the last step with training groups; the held-out games when none trained).

    Example:
        where_to_look(model)[1]  # 'look:    art ui .art    (in the browser: ...)'
    """
    storage = model.storage
    trained = storage.logged_steps("train")
    split, steps = ("train", trained) if trained else ("val", storage.logged_steps("val"))
    step = steps[-1] if steps else 0
    base = shlex.quote(str(model.base_path))
    show = f"art show {base} --project {model.project} --name {model.name} --step {step}"
    show += "" if split == "train" else " --split val"
    return [
        f"record:  {storage.root}",
        f"look:    art ui {base}    (in the browser: charts by step, groups side by side, tokens by advantage)",
        f"         {show}    (a group of step {step} in the terminal, with advantages)",
    ]


def demo_config(
    *, quick: bool = False, sft_warmup: bool = False, rl_only: bool = False, **overrides: object
) -> DemoConfig:
    """The demo's config: the warm start (`WARM_START`) by default, RL alone with `rl_only`, the 30-minute
    recipe with `sft_warmup`; `quick` shrinks any of them to a smoke run."""
    if sft_warmup and rl_only:
        raise ValueError("sft_warmup and rl_only exclude each other: --sft-warmup starts with SFT")
    if sft_warmup:
        preset: dict[str, object] = dict(SFT_WARMUP)
        if quick:  # the quick sizes, no budget
            preset.update(sft_games=8, sft_epochs=1, select_games=4)
            del preset["steps"], preset["time_budget_minutes"]
    elif rl_only:
        preset = {"name": RL_ONLY_NAME}
    else:
        preset = dict(WARM_START)
        if quick:  # the quick sizes
            preset.update(sft_games=8, sft_epochs=1, select_games=4)
            del preset["steps"], preset["groups_per_step"], preset["eval_every"]
    overrides = {**preset, **overrides}
    return DemoConfig.quick(**overrides) if quick else DemoConfig(**overrides)  # type: ignore[arg-type]


def main() -> None:
    """Command-line entry: `python -m art.examples.tic_tac_toe.train [--quick] [--steps N] ...`."""
    import argparse

    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    defaults = DemoConfig()
    parser.add_argument("--quick", action="store_true", help="a two-minute smoke run")
    parser.add_argument("--sft-warmup", action="store_true", help="the 30-minute SFT-then-RL recipe")
    parser.add_argument("--rl-only", action="store_true", help="RL alone, no SFT step")
    for key, value in asdict(defaults).items():
        if isinstance(value, int | float | str) and not isinstance(value, bool):
            parser.add_argument(f"--{key.replace('_', '-')}", type=type(value), default=None)
    args = vars(parser.parse_args())
    quick, sft_warmup, rl_only = args.pop("quick"), args.pop("sft_warmup"), args.pop("rl_only")
    overrides = {k: v for k, v in args.items() if v is not None}
    config = demo_config(quick=quick, sft_warmup=sft_warmup, rl_only=rl_only, **overrides)
    asyncio.run(run_demo(config))


if __name__ == "__main__":
    main()
