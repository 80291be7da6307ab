"""Supervised fine-tuning over a stream of trajectories: batches, learning rates, bad data, metrics.

`run_sft(trainer, trajectories, spec)` is one `train_sft` call's training (the service saves and publishes
one checkpoint after it, like an RL step):

    for each batch of trajectories (`spec.batch_size` of them, or as many as fit in `spec.batch_tokens`):
        validate + tokenise each one (every assistant turn is trained, see `tokenize.tokenize_sft_history`)
        one `Trainer.sft_step` at the batch's learning rate (`spec.learning_rate`: one value, or one per batch)

The stream is read one batch at a time, so a file larger than memory trains. A trajectory that cannot be
trained (invalid messages, no assistant turn at the end, longer than `spec.max_seq_len`) stops the call with
an error that names it (its file and line when it came from one, else its index) and the fix; with
`spec.skip_invalid` it is left out and counted. Batches keep their place in the stream whatever is left out,
so a per-batch learning-rate schedule computed from the number of trajectories stays aligned.

Metrics follow the reference: per batch `loss`, `learning_rate`, `grad_norm`, `num_trajectories`,
`num_tokens`, `num_trainable_tokens`, `num_dropped_trajectories`, `tokens_per_second`; per call (averaged)
`loss/train`, `loss/learning_rate`, `loss/grad_norm` and the totals `data/step_num_trajectories`,
`data/step_trainer_tokens`, `data/step_num_dropped_trajectories`, `data/step_num_gradient_steps`.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from tqdm.auto import tqdm

from art.training.tokenize import TokenizedSequence
from art.trajectories import SFT_SKIP_HINT, Trajectory, describe_source
from art.types import SFTSpec

if TYPE_CHECKING:
    from art.training.trainer import Trainer

logger = logging.getLogger(__name__)


TokenizeFn = Callable[[Trajectory], list[TokenizedSequence]]


class SFTDataError(ValueError):
    """A conversation that cannot be trained: names where it came from and the fix."""


@dataclass
class SFTBatch:
    """One optimiser step's data: its sequences, learning rate, and what was left out of it."""

    index: int
    sequences: list[TokenizedSequence] = field(default_factory=list)
    learning_rate: float = 0.0
    num_trajectories: int = 0  # trajectories trained in this batch
    num_dropped_trajectories: int = 0  # left out (skip_invalid)

    @property
    def num_tokens(self) -> int:
        """Tokens of the batch's sequences."""
        return sum(len(s) for s in self.sequences)


class SFTBatcher:
    """Validates, tokenises and groups a stream of trajectories into `SFTBatch`es (see module docstring)."""

    def __init__(self, tokenize: TokenizeFn, spec: SFTSpec) -> None:
        self.tokenize = tokenize
        self.spec = spec
        self.dropped_examples: list[str] = []  # the first few problems, for the summary message

    def batches(self, trajectories: Iterable[Trajectory]) -> Iterator[SFTBatch]:
        """Batches in stream order, each with its learning rate."""
        spec = self.spec
        batch = SFTBatch(index=0)
        members = 0  # trajectories placed in the current batch, trained or dropped
        for index, trajectory in enumerate(trajectories):
            sequences = self._sequences(trajectory, index)
            tokens = sum(len(s) for s in sequences)
            full = (
                members >= spec.batch_size
                if isinstance(spec.batch_size, int)
                else members > 0 and batch.num_tokens + tokens > spec.batch_tokens
            )
            if full:
                yield self._with_learning_rate(batch)
                batch, members = SFTBatch(index=batch.index + 1), 0
            members += 1
            if sequences:
                batch.sequences += sequences
                batch.num_trajectories += 1
            else:
                batch.num_dropped_trajectories += 1
        if members:
            yield self._with_learning_rate(batch)
            batch = SFTBatch(index=batch.index + 1)
        rates = self.spec.learning_rate
        if isinstance(rates, list) and len(rates) > batch.index:
            logger.warning(
                "learning_rate has %d values (one per batch) but the trajectories made %d batches; the last "
                "%d values were not used",
                len(rates),
                batch.index,
                len(rates) - batch.index,
            )

    def _with_learning_rate(self, batch: SFTBatch) -> SFTBatch:
        rates = self.spec.learning_rate
        if not isinstance(rates, list):
            batch.learning_rate = rates
        elif batch.index < len(rates):
            batch.learning_rate = rates[batch.index]
        else:
            raise SFTDataError(
                f"learning_rate has {len(rates)} values (one per batch) but the trajectories make more than "
                f"{len(rates)} batches of batch_size={self.spec.batch_size}; give one learning rate per batch "
                "(math.ceil(len(trajectories) / batch_size) values) or a single float"
            )
        return batch

    def _sequences(self, trajectory: Trajectory, index: int) -> list[TokenizedSequence]:
        """The trajectory's sequences; [] when it was dropped (skip_invalid). Raises SFTDataError otherwise."""
        if not isinstance(trajectory, Trajectory):
            raise TypeError(
                f"trajectories[{index}] is a {type(trajectory).__name__}; train_sft takes art.Trajectory objects"
            )
        try:
            trajectory.validate_for_sft()
            sequences = self.tokenize(trajectory)
            longest = max((len(s) for s in sequences), default=0)
            if longest > self.spec.max_seq_len:
                raise ValueError(
                    f"the conversation has {longest} tokens, more than max_seq_len={self.spec.max_seq_len}; "
                    "shorten it, split it, or raise max_seq_len"
                )
            if not any(s.num_assistant_tokens for s in sequences):
                raise ValueError(
                    "no assistant token to train on; end the conversation with an assistant turn"
                )
        except ValueError as e:
            where = describe_source(trajectory, index)
            if not self.spec.skip_invalid:
                raise SFTDataError(f"{where}: {e}; {SFT_SKIP_HINT}") from None
            if len(self.dropped_examples) < 3:
                self.dropped_examples.append(f"{where}: {e}")
            logger.warning("skipped %s: %s", where, e)
            return []
        return sequences


@dataclass
class SFTReport:
    """What one `run_sft` did: per-batch metrics, the call's averaged metrics, and a plain note."""

    batch_metrics: list[dict[str, float]]
    metrics: dict[str, float]
    updated: bool  # whether any optimiser step was taken
    message: str | None = None


def average_metrics(batch_metrics: Sequence[dict[str, float]]) -> dict[str, float]:
    """The reference's per-call metrics: means of the per-batch loss, learning rate and gradient norm,
    totals of trajectories, trained tokens and left-out trajectories, and the number of batches."""
    trained = [m for m in batch_metrics if "loss" in m]

    def mean(key: str) -> float:
        return sum(m[key] for m in trained) / len(trained) if trained else math.nan

    return {
        "loss/train": mean("loss"),
        "loss/learning_rate": mean("learning_rate"),
        "loss/grad_norm": mean("grad_norm"),
        "data/step_num_trajectories": sum(m["num_trajectories"] for m in batch_metrics),
        "data/step_trainer_tokens": sum(m["num_trainable_tokens"] for m in batch_metrics),
        "data/step_num_dropped_trajectories": sum(m["num_dropped_trajectories"] for m in batch_metrics),
        "data/step_num_gradient_steps": float(len(trained)),
    }


def run_sft(
    trainer: Trainer,
    trajectories: Iterable[Trajectory],
    spec: SFTSpec,
    *,
    progress: bool = True,
    verbose: bool = False,
    total_batches: int | None = None,
) -> SFTReport:
    """Train `trajectories` batch by batch (synchronous; call it while inference is paused)."""
    last_only = spec.assistant_turns == "last"

    def tokenize(trajectory: Trajectory) -> list[TokenizedSequence]:
        return trainer.tokenizer.tokenize_sft_trajectory(trajectory, last_turn_only=last_only)

    batcher = SFTBatcher(tokenize, spec)
    batch_metrics: list[dict[str, float]] = []
    skipped_steps: list[str] = []
    bar = tqdm(total=total_batches, desc="sft train", unit="batch", disable=not progress)
    started = time.perf_counter()
    try:
        for batch in batcher.batches(trajectories):
            t0 = time.perf_counter()
            metrics: dict[str, float] = {
                "learning_rate": batch.learning_rate,
                "num_trajectories": float(batch.num_trajectories),
                "num_tokens": float(batch.num_tokens),
                "num_trainable_tokens": float(sum(s.num_assistant_tokens for s in batch.sequences)),
                "num_dropped_trajectories": float(batch.num_dropped_trajectories),
            }
            if batch.sequences:
                report = trainer.sft_step(batch.sequences, spec, learning_rate=batch.learning_rate)
                if report.updated:
                    metrics.update(
                        loss=report.metrics["loss"],
                        grad_norm=report.metrics["grad_norm"],
                        optimizer_reset=report.metrics["optimizer_reset"],
                    )
                elif report.message:
                    skipped_steps.append(f"batch {batch.index}: {report.message}")
            metrics["tokens_per_second"] = batch.num_tokens / max(time.perf_counter() - t0, 1e-9)
            batch_metrics.append(metrics)
            bar.update(1)
            if "loss" in metrics:
                bar.set_postfix(loss=f"{metrics['loss']:.4f}", refresh=False)
            if verbose:
                print(
                    f"batch {batch.index}: loss={metrics.get('loss', math.nan):.4f} "
                    f"lr={batch.learning_rate:.2e} grad_norm={metrics.get('grad_norm', math.nan):.4f} "
                    f"tok/s={metrics['tokens_per_second']:.1f}"
                )
    finally:
        bar.close()
    summary = average_metrics(batch_metrics)
    summary["time/step_trainer_s"] = time.perf_counter() - started
    updated = summary["data/step_num_gradient_steps"] > 0
    notes = []
    dropped = int(summary["data/step_num_dropped_trajectories"])
    if dropped:
        notes.append(
            f"skipped {dropped} invalid or too long conversation(s) (skip_invalid=True), e.g. "
            + "; ".join(batcher.dropped_examples)
        )
    notes += skipped_steps
    if not batch_metrics:
        notes.append("no trajectories were given")
    message = None
    if not updated:
        message = "Nothing was trained in this call: " + ("; ".join(notes) or "no batch had data") + "."
    elif notes:
        message = "Note: " + "; ".join(notes) + "."
    return SFTReport(batch_metrics, summary, updated, message)
