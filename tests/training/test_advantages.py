"""Advantages against hand-computed values, and the step's drop accounting and "nothing to train" messages."""

from __future__ import annotations

import math

import pytest

from art.training.advantages import group_advantages
from art.training.prepare import prepare_step
from art.training.tokenize import TrajectoryTokenizer
from art.trajectories import Trajectory, TrajectoryGroup
from art.types import TrainSpec


def test_advantages_hand_computed():
    # mean 0.5; sample std = sqrt(4 * 0.25 / 3) = 0.57735
    std = math.sqrt(1 / 3)
    a = 0.5 / (std + 1e-6)
    assert group_advantages([1, 0, 0, 1]) == pytest.approx([a, -a, -a, a])
    assert a == pytest.approx(0.866024, abs=1e-5)
    assert group_advantages([1, 0, 0, 1], scale_rewards=False) == [0.5, -0.5, -0.5, 0.5]
    # mean 2, sample std 1: the middle trajectory has exactly zero advantage
    assert group_advantages([1.0, 2.0, 3.0]) == pytest.approx([-1 / (1 + 1e-6), 0.0, 1 / (1 + 1e-6)])
    assert group_advantages([1.0, 2.0, 3.0])[1] == 0.0


def test_equal_rewards_and_singletons_are_exactly_zero():
    assert group_advantages([0.1, 0.1, 0.1]) == [0.0, 0.0, 0.0]  # mean is 0.10000000000000002
    assert group_advantages([5.0]) == [0.0]
    assert group_advantages([]) == []


@pytest.fixture()
def tok(chat_template) -> TrajectoryTokenizer:
    return TrajectoryTokenizer(chat_template)


def _traj(items, reward: float) -> Trajectory:
    return Trajectory(messages_and_choices=[{"role": "user", "content": "digit?"}, *items], reward=reward)


def test_equal_rewards_message(tok, make_choice):
    group = TrajectoryGroup([_traj([make_choice("7")], 1.0) for _ in range(4)])
    data = prepare_step([group], tok, TrainSpec(), current_step=0)
    assert data.sequences == [] and data.trainable_groups == 0
    assert data.metrics["dropped_equal_reward_groups"] == 1
    assert data.metrics["dropped_zero_advantage_trajectories"] == 4
    assert (
        data.message is not None
        and "no trainable groups" in data.message
        and "1 group had all rewards equal" in data.message
    )


def test_no_logprobs_message_names_the_fix(tok):
    group = TrajectoryGroup([_traj([{"role": "assistant", "content": str(d)}], float(d)) for d in range(3)])
    data = prepare_step([group], tok, TrainSpec(), current_step=0)
    assert data.sequences == [] and data.metrics["dropped_no_logprobs_trajectories"] == 2  # one has A = 0
    assert data.metrics["trajectories_without_trainable_turns"] == 3
    assert data.message is not None
    assert "3 trajectories had no trainable turn" in data.message and "response.choices[0]" in data.message
    assert "logprobs" in data.message


def test_too_long_sequences_are_reported_and_dropped(tok, make_choice):
    long_text = "The quick brown fox jumps over the lazy dog. " * 8
    group = TrajectoryGroup([_traj([make_choice("7")], 1.0), _traj([make_choice(long_text)], 0.0)])
    short = tok.tokenize_trajectory(group.trajectories[0])[0][0]
    long = tok.tokenize_trajectory(group.trajectories[1])[0][0]
    spec = TrainSpec(max_seq_len=len(short))
    data = prepare_step([group], tok, spec, current_step=0)
    assert [len(s) for s in data.sequences] == [len(short)]  # kept, not truncated
    assert data.metrics["dropped_too_long_sequences"] == 1 and data.metrics["too_long_max_tokens"] == len(
        long
    )
    assert data.message is not None and f"longer than max_seq_len={len(short)}" in data.message
    assert str(len(long)) in data.message

    data = prepare_step([group], tok, TrainSpec(max_seq_len=8), current_step=0)
    assert data.sequences == [] and data.metrics["dropped_too_long_sequences"] == 2
    assert data.message is not None and "all remaining sequences were too long" in data.message


def test_counts_and_staleness(tok, make_choice):
    groups = [
        TrajectoryGroup(
            [
                _traj([make_choice("7", checkpoint_step=3)], 1.0),
                _traj([make_choice("3", checkpoint_step=1)], 0.0),
                _traj([{"role": "assistant", "content": "5"}], 0.0),
            ]
        ),
        TrajectoryGroup([_traj([make_choice("7")], 1.0), _traj([make_choice("7")], 1.0)]),
    ]
    data = prepare_step(groups, tok, TrainSpec(), current_step=4)
    m = data.metrics
    assert (data.trainable_groups, data.trainable_trajectories) == (1, 2) and data.message is None
    assert m["num_groups"] == 2 and m["num_trajectories"] == 5 and m["num_sequences"] == 2
    assert m["dropped_equal_reward_groups"] == 1 and m["dropped_zero_advantage_trajectories"] == 2
    assert m["dropped_no_logprobs_trajectories"] == 1
    assert m["staleness_mean"] == 2.0 and m["staleness_max"] == 3
    assert m["reward_mean"] == pytest.approx(0.6)
    assert sorted(s.advantage > 0 for s in data.sequences) == [False, True]
