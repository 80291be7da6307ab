"""`iterate_dataset`: a dataset as training steps, shuffled deterministically per epoch, resumable."""

from __future__ import annotations

import math
import random
from collections.abc import Iterator, Sequence
from typing import Generic, TypeVar

from pydantic import BaseModel, ConfigDict
from tqdm import tqdm

T = TypeVar("T")


class DatasetBatch(BaseModel, Generic[T]):
    """The items of one training step, with its global step, epoch and step within the epoch.

    Example:
        >>> batch = next(art.iterate_dataset(["a", "b", "c"], groups_per_step=2, use_tqdm=False))
        >>> (len(batch.items), batch.step, batch.epoch, batch.epoch_step)
        (2, 0, 0, 0)
    """

    model_config = ConfigDict(arbitrary_types_allowed=True)

    items: list[T]
    step: int
    epoch: int
    epoch_step: int


def iterate_dataset(
    dataset: Sequence[T],
    groups_per_step: int = 1,
    num_epochs: int = 1,
    initial_step: int = 0,
    use_tqdm: bool = True,
    *,
    seed: int | None = None,
) -> Iterator[DatasetBatch[T]]:
    """Yield batches of `groups_per_step` items; each epoch is a fresh shuffle, seeded by the epoch as the
    reference seeds it (`random.Random(epoch)`: the same batches as the reference's), or by (seed, epoch)
    when `seed` is given (ours: another order for the same data).

    The same arguments give the same batches, so passing `initial_step=model_step` resumes exactly
    where an interrupted run stopped (earlier steps are skipped, not replayed). The last batch of an
    epoch may be smaller.

    Example:
        >>> batches = art.iterate_dataset(["a", "b", "c"], groups_per_step=2, num_epochs=2, use_tqdm=False)
        >>> [(b.step, b.epoch, len(b.items)) for b in batches]
        [(0, 0, 2), (1, 0, 1), (2, 1, 2), (3, 1, 1)]
    """
    if groups_per_step < 1:
        raise ValueError(f"groups_per_step must be >= 1, got {groups_per_step}")
    if num_epochs < 0 or initial_step < 0:
        raise ValueError("num_epochs and initial_step must be >= 0")
    size = len(dataset)
    steps_per_epoch = math.ceil(size / groups_per_step)
    total = steps_per_epoch * num_epochs
    bar = tqdm(total=total, initial=min(initial_step, total), desc="steps", unit="step") if use_tqdm else None
    try:
        for epoch in range(num_epochs):
            if (epoch + 1) * steps_per_epoch <= initial_step:
                continue  # the whole epoch is behind us
            order = list(range(size))
            random.Random(epoch if seed is None else f"{seed}:{epoch}").shuffle(order)
            for epoch_step in range(steps_per_epoch):
                step = epoch * steps_per_epoch + epoch_step
                if step < initial_step:
                    continue
                chunk = order[epoch_step * groups_per_step : (epoch_step + 1) * groups_per_step]
                yield DatasetBatch(
                    items=[dataset[i] for i in chunk], step=step, epoch=epoch, epoch_step=epoch_step
                )
                if bar is not None:
                    bar.update(1)
    finally:
        if bar is not None:
            bar.close()
