"""iterate_dataset(): deterministic shuffles, epochs, and exact resume."""

from __future__ import annotations

import pytest

from art import iterate_dataset


def batches(**kwargs: object) -> list[tuple[int, int, int, list[int]]]:
    return [
        (b.step, b.epoch, b.epoch_step, b.items)
        for b in iterate_dataset(list(range(10)), use_tqdm=False, **kwargs)  # type: ignore[arg-type]
    ]


def test_same_arguments_same_batches_and_every_item_once_per_epoch() -> None:
    first = batches(groups_per_step=3, num_epochs=2)
    assert first == batches(groups_per_step=3, num_epochs=2)
    assert [s for s, *_ in first] == list(range(8))
    for epoch in (0, 1):
        items = [i for s, e, _, chunk in first if e == epoch for i in chunk]
        assert sorted(items) == list(range(10))
    assert [len(chunk) for *_, chunk in first[:4]] == [3, 3, 3, 1]
    epoch0 = [i for _, e, _, c in first if e == 0 for i in c]
    epoch1 = [i for _, e, _, c in first if e == 1 for i in c]
    assert epoch0 != epoch1  # a fresh shuffle each epoch
    assert epoch0 != list(range(10))


def test_resume_from_initial_step_continues_exactly() -> None:
    full = batches(groups_per_step=4, num_epochs=3)
    resumed = batches(groups_per_step=4, num_epochs=3, initial_step=5)
    assert resumed == full[5:]


def test_the_default_order_is_the_references() -> None:
    """The reference shuffles each epoch with `random.Random(epoch)`: the same batches, item for item."""
    import random

    for epoch in (0, 1, 2):
        order = list(range(10))
        random.Random(epoch).shuffle(order)
        expected = [order[i : i + 4] for i in range(0, 10, 4)]
        assert [
            chunk for _, e, _, chunk in batches(groups_per_step=4, num_epochs=3) if e == epoch
        ] == expected


def test_seed_changes_order() -> None:
    assert batches(groups_per_step=10, seed=1) != batches(groups_per_step=10, seed=2)


def test_bad_arguments() -> None:
    with pytest.raises(ValueError, match="groups_per_step"):
        list(iterate_dataset([1], groups_per_step=0, use_tqdm=False))
