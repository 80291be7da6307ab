"""The trainer's record of one RL step (`art.record.step_record.StepTrainerRecord`), collected as it trains.

`prepare_step` decides each trajectory's advantage and fate; `StepTrace.add_batch` reads, after each
micro-batch's forward pass, the trainer's logprob and the importance ratio of every token of every sampled
turn (located by the sequences' `turn_spans`); `StepTrace.record` puts both together, in the groups' order.
Only numbers already computed for the loss are read (detached, copied to the CPU once per micro-batch).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from art.record.step_record import (
    StepTrainerRecord,
    TokenStats,
    TrainedGroup,
    TrainedTrajectory,
    TrainedTurn,
    rounded,
)
from art.training.prepare import StepData
from art.training.tokenize import TokenizedSequence
from art.types import TrainSpec


class StepTrace:
    """Per-token trainer values of one step's trained turns, keyed by (group, trajectory)."""

    def __init__(self) -> None:
        self.turns: dict[tuple[int, int], list[TrainedTurn]] = {}
        # (advantage, sampled logprob, trainer logprob, ratio) of every trained token
        self.tokens: list[tuple[float, float, float, float]] = []

    def add_batch(
        self, sequences: Sequence[TokenizedSequence], logprobs_BT: torch.Tensor, ratio_BT: torch.Tensor
    ) -> None:
        """Record one micro-batch: row b of the tensors is `sequences[b]`; position t is about token t + 1."""
        logprobs = logprobs_BT.detach().float().cpu()
        ratios = ratio_BT.detach().float().cpu()
        for b, seq in enumerate(sequences):
            for span in seq.turn_spans:
                # token p of the sequence is scored at position p - 1 (the first token never is)
                lo, hi = max(span.start - 1, 0), span.start - 1 + span.length
                row_lp = logprobs[b, lo:hi].tolist()
                row_ratio = ratios[b, lo:hi].tolist()
                offset = lo - (span.start - 1)
                turn = TrainedTurn(history=span.history, item=span.item)
                for j in range(span.length):
                    p = span.start + j
                    trained = bool(seq.assistant_mask[p]) and p >= 1
                    turn.trained.append(trained)
                    if not trained:
                        turn.trainer_logprob.append(None)
                        turn.ratio.append(None)
                        continue
                    lp, ratio = row_lp[j - offset], row_ratio[j - offset]
                    turn.trainer_logprob.append(rounded(lp))
                    turn.ratio.append(rounded(ratio))
                    self.tokens.append((seq.advantage, seq.sampled_logprobs[p], lp, ratio))
                key = (seq.group_index, seq.trajectory_index)
                self.turns.setdefault(key, []).append(turn)

    def record(
        self, data: StepData, group_sizes: Sequence[int], spec: TrainSpec, *, updated: bool
    ) -> StepTrainerRecord:
        """The step's record: every trajectory of every group (trained or not), with what was collected."""
        epsilon, epsilon_high = spec.clip_range()
        low, high = 1.0 - epsilon, 1.0 + epsilon_high
        groups = []
        for gi, size in enumerate(group_sizes):
            trajectories = []
            for ti in range(size):
                advantage, status = data.outcomes.get((gi, ti), (0.0, "zero_advantage"))
                turns = sorted(self.turns.get((gi, ti), []), key=lambda t: (t.history, t.item))
                trajectories.append(
                    TrainedTrajectory(
                        advantage=rounded(advantage) or 0.0,
                        status=status,  # type: ignore[arg-type]  # prepare_step writes only statuses
                        trained_tokens=sum(sum(t.trained) for t in turns),
                        turns=turns,
                    )
                )
            groups.append(TrainedGroup(index=gi, trajectories=trajectories))
        return StepTrainerRecord(
            updated=updated,
            loss_fn=spec.loss_fn,
            importance_sampling_level=spec.importance_sampling_level,
            scale_rewards=spec.scale_rewards,
            clip_range=(low, high),
            token_stats=TokenStats.of(self.tokens, low, high),
            groups=groups,
        )
