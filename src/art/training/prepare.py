"""One step's data: groups -> advantages -> tokenised sequences, with every drop counted and explained.

Order of filters, each counted in the metrics: (1) groups whose rewards are all equal and trajectories whose
advantage is zero; (2) trajectories with no trainable turn (no Choice with logprobs); (3) sequences longer
than `spec.max_seq_len` (reported with their lengths, never truncated). When nothing is left, `message`
says why in plain words and names the fix.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field

from art.training.advantages import group_advantages, reward_stats
from art.training.tokenize import TokenizedSequence, TokenizeStats, TrajectoryTokenizer
from art.trajectories import TrajectoryGroup
from art.types import TrainSpec

logger = logging.getLogger(__name__)

NO_LOGPROBS_FIX = (
    "append `response.choices[0]` (the Choice, not a message dict) to `messages_and_choices` and keep "
    "the engine's logprobs"
)


@dataclass
class StepData:
    """The sequences to train on and what happened on the way (metrics are unprefixed floats)."""

    sequences: list[TokenizedSequence]
    metrics: dict[str, float] = field(default_factory=dict)
    trainable_groups: int = 0
    trainable_trajectories: int = 0
    message: str | None = None
    # (group, trajectory) -> (advantage, what became of it: a `step_record.TrajectoryStatus`)
    outcomes: dict[tuple[int, int], tuple[float, str]] = field(default_factory=dict)


def _step_message(
    spec: TrainSpec,
    *,
    nothing: bool,
    given: bool,
    equal_groups: int,
    without_turns: int,
    unaligned: int,
    too_long: list[int],
) -> str | None:
    """What the step says to the user: why there is nothing to train (`nothing`), or a note on sequences
    dropped for being over `max_seq_len` (also logged), or None."""
    notes: list[str] = []
    if too_long:
        note = (
            f"dropped {_plural(len(too_long), 'sequence')} longer than max_seq_len={spec.max_seq_len} "
            f"(lengths {', '.join(map(str, sorted(too_long, reverse=True)[:5]))}"
            f"{', ...' if len(too_long) > 5 else ''} tokens); raise max_seq_len or shorten rollouts"
        )
        logger.warning(note)
        notes.append(note)
    message = None
    if nothing:
        reasons: list[str] = []
        if not given:
            reasons.append("no trajectories were given")
        if equal_groups:
            reasons.append(
                f"{_plural(equal_groups, 'group')} had all rewards equal, so no rollout did better than "
                "another (vary the scenarios, sample at a higher temperature, or make the reward finer)"
            )
        if without_turns:
            reasons.append(
                f"{_plural(without_turns, 'trajectory')} had no trainable turn (no Choice with logprobs): "
                + NO_LOGPROBS_FIX
            )
        if unaligned:
            reasons.append(
                f"{_plural(unaligned, 'trajectory')} had logprobs that do not line up with "
                "their tokens (use choices returned by the ART engine)"
            )
        if too_long:
            reasons.append(f"all remaining sequences were too long: {notes[0]}")
        message = "Nothing to train in this step: no trainable groups. " + "; ".join(reasons) + "."
    elif notes:
        message = "Note: " + "; ".join(notes) + "."
    return message


def _plural(n: int, word: str) -> str:
    if n == 1:
        return f"{n} {word}"
    return f"{n} {word[:-1]}ies" if word.endswith("y") else f"{n} {word}s"


def prepare_step(
    groups: Sequence[TrajectoryGroup],
    tokenizer: TrajectoryTokenizer,
    spec: TrainSpec,
    *,
    current_step: int,
) -> StepData:
    """Advantages, tokenisation and filtering of one step's groups (see module docstring).

    Long on purpose: one pass over the groups decides each trajectory's outcome and tallies the dozen
    counts (dropped for equal rewards, zero advantage, no logprobs, too long, unaligned; trainable groups and
    trajectories) that the step's metrics report and its message explains; split, those counts would travel
    between the pieces in a record of their own."""
    sequences: list[TokenizedSequence] = []
    stats = TokenizeStats()
    rewards: list[float] = []
    equal_groups = zero_adv_trajectories = no_logprobs = 0
    too_long_lengths: list[int] = []
    too_long_trajectories = unaligned_trajectories = 0
    trainable_groups: set[int] = set()
    trainable_trajectories: set[tuple[int, int]] = set()
    num_trajectories = sum(len(g.trajectories) for g in groups)
    outcomes: dict[tuple[int, int], tuple[float, str]] = {}
    # Counted over all trajectories, whatever their advantage, so the message can name this cause too.
    loose = spec.allow_training_without_logprobs
    without_turns = sum(
        1 for g in groups for t in g.trajectories if t.num_trainable_turns(without_logprobs=loose) == 0
    )

    for gi, group in enumerate(groups):
        group_rewards = [t.reward for t in group.trajectories]
        rewards += group_rewards
        advantages = group_advantages(group_rewards, scale_rewards=spec.scale_rewards)
        if group_rewards and all(a == 0.0 for a in advantages):
            equal_groups += 1
        for ti, (trajectory, advantage) in enumerate(zip(group.trajectories, advantages, strict=True)):
            if advantage == 0.0:
                zero_adv_trajectories += 1
                outcomes[gi, ti] = (advantage, "zero_advantage")
                continue
            if trajectory.num_trainable_turns(without_logprobs=loose) == 0:
                no_logprobs += 1
                outcomes[gi, ti] = (advantage, "no_trainable_turn")
                continue
            seqs, traj_stats = tokenizer.tokenize_trajectory(
                trajectory,
                advantage=advantage,
                group_index=gi,
                trajectory_index=ti,
                without_logprobs=loose,
            )
            stats.add(traj_stats)
            kept = [s for s in seqs if len(s) <= spec.max_seq_len]
            too_long_lengths += [len(s) for s in seqs if len(s) > spec.max_seq_len]
            if kept:
                sequences += kept
                trainable_groups.add(gi)
                trainable_trajectories.add((gi, ti))
                outcomes[gi, ti] = (advantage, "trained")
            elif seqs:
                too_long_trajectories += 1
                outcomes[gi, ti] = (advantage, "too_long")
            else:
                unaligned_trajectories += 1
                outcomes[gi, ti] = (advantage, "unaligned")

    reward_mean, reward_std = reward_stats(rewards)
    staleness = [current_step - s for seq in sequences for s in seq.checkpoint_steps]
    metrics: dict[str, float] = {
        "num_groups": len(groups),
        "num_trajectories": num_trajectories,
        "trainable_groups": len(trainable_groups),
        "trainable_trajectories": len(trainable_trajectories),
        "num_sequences": len(sequences),
        "reward_mean": reward_mean,
        "reward_std": reward_std,
        "dropped_equal_reward_groups": equal_groups,
        "dropped_zero_advantage_trajectories": zero_adv_trajectories,
        "dropped_no_logprobs_trajectories": no_logprobs,
        "trajectories_without_trainable_turns": without_turns,
        "dropped_too_long_sequences": len(too_long_lengths),
        "dropped_unaligned_trajectories": unaligned_trajectories,
        "trainable_turns": stats.trainable_turns,
        "retokenized_turns": stats.retokenized_turns,
        "unaligned_turns": stats.unaligned_turns,
        "split_histories": stats.split_histories,
    }
    if too_long_lengths:
        metrics["too_long_max_tokens"] = max(too_long_lengths)
    if staleness:
        metrics["staleness_mean"] = sum(staleness) / len(staleness)
        metrics["staleness_max"] = max(staleness)

    message = _step_message(
        spec,
        nothing=not sequences,
        given=bool(groups) and num_trajectories > 0,
        equal_groups=equal_groups,
        without_turns=without_turns,
        unaligned=unaligned_trajectories,
        too_long=too_long_lengths,
    )
    return StepData(sequences, metrics, len(trainable_groups), len(trainable_trajectories), message, outcomes)
