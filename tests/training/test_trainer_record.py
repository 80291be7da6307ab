"""The trainer's record of a step (art.record.step_record): each trajectory's advantage and fate, and for every
sampled token of a trained turn the trainer's logprob and importance ratio, checked against an independent
forward pass and the loss's own definition."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest
from test_trainer import PROMPT, load_model, perturb_lora_b, random_groups

from art.chat.chat_template import ChatTemplate
from art.training.advantages import group_advantages
from art.training.trainer import Trainer
from art.trajectories import Trajectory, TrajectoryGroup
from art.types import TrainSpec


@pytest.fixture()
def trainer(tiny_model_path: Path, chat_template: ChatTemplate) -> Trainer:
    trainer = Trainer(load_model(tiny_model_path), chat_template)
    perturb_lora_b(trainer)  # the adapter changes logprobs, so ratios differ from 1
    return trainer


def test_every_trajectory_gets_its_advantage_and_every_trained_token_its_trainer_values(
    trainer: Trainer, tokenizer: Any, make_choice: Any
) -> None:
    groups = random_groups(tokenizer, make_choice, groups=2, size=4, seed=7)
    # a third group whose rewards are all equal: recorded, advantage 0, not trained
    flat = TrajectoryGroup(
        [Trajectory(messages_and_choices=[*PROMPT, make_choice("7")], reward=0.5) for _ in range(3)]
    )
    groups.append(flat)
    # what the trainer will see: each sequence's logprobs under the adapter as it is before the step
    expected: dict[tuple[int, int], list[float]] = {}
    for gi, group in enumerate(groups[:2]):
        for ti, t in enumerate(group.trajectories):
            (seq,), _ = trainer.tokenizer.tokenize_trajectory(t)
            logprobs = trainer.logprobs(seq.token_ids)
            (span,) = seq.turn_spans
            expected[gi, ti] = [logprobs[span.start + j - 1] for j in range(span.length)]

    report = trainer.train_step(groups, TrainSpec(micro_batch_tokens=64), current_step=0, progress=False)

    record = report.record
    assert record is not None and record.updated
    assert [len(g.trajectories) for g in record.groups] == [4, 4, 3]
    for gi, group in enumerate(groups):
        advantages = group_advantages([t.reward for t in group.trajectories])
        for ti, (t, trained) in enumerate(
            zip(group.trajectories, record.groups[gi].trajectories, strict=True)
        ):
            assert trained.advantage == pytest.approx(advantages[ti], abs=1e-6)
            if gi == 2:
                assert trained.status == "zero_advantage" and trained.turns == []
                continue
            assert trained.status == "trained"
            (turn,) = trained.turns
            choice = t.messages_and_choices[-1]
            assert (turn.history, turn.item) == (0, len(t.messages_and_choices) - 1)
            sampled = [e.logprob for e in choice.logprobs.content]  # type: ignore[union-attr]
            assert len(turn.trained) == len(sampled) and all(turn.trained)
            assert turn.trainer_logprob == pytest.approx(expected[gi, ti], abs=1e-4)
            for lp, old, ratio in zip(turn.trainer_logprob, sampled, turn.ratio, strict=True):
                assert lp is not None and ratio is not None
                assert ratio == pytest.approx(math.exp(lp - old), rel=1e-4)
            assert trained.trained_tokens == len(sampled)
    stats = record.token_stats
    assert stats.trained_tokens == report.metrics["num_assistant_tokens"]
    assert stats.ratio_mean == pytest.approx(report.metrics["ratio_mean"], rel=1e-4)
    assert stats.clipped_fraction == pytest.approx(report.metrics["clip_fraction"], abs=1e-6)
    assert stats.positive_advantage_tokens + stats.negative_advantage_tokens == stats.trained_tokens


def test_a_step_with_nothing_to_train_still_records_why(trainer: Trainer) -> None:
    group = TrajectoryGroup(
        Trajectory(messages_and_choices=[*PROMPT, {"role": "assistant", "content": "7"}], reward=r)
        for r in (1.0, 1.0, 0.0)
    )
    report = trainer.train_step([group], TrainSpec(), current_step=0, progress=False)
    assert not report.updated and report.record is not None and not report.record.updated
    trajectories = report.record.groups[0].trajectories
    assert [t.status for t in trajectories] == ["no_trainable_turn"] * 3
    assert [t.advantage for t in trajectories] == pytest.approx(group_advantages([1.0, 1.0, 0.0]), abs=1e-6)
    assert report.record.token_stats.trained_tokens == 0
