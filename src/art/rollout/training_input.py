"""What a training step is given, checked before anything trains: sampled token ids and their logprobs.

A trainable turn is an OpenAI `Choice` whose sampled token ids (`token_ids`, or `"token_id:<n>"` tokens)
and logprobs the trainer uses as they are. A token id that is not an integer of the model's vocabulary
fails the step in the middle of training (on a GPU a device-side assert takes the process down), and a
logprob that is not a finite number <= 0 trains nonsense into a committed step. So both are checked when
the step is submitted: `check_training_groups` (anywhere, no model needed) and, where the vocabulary is
known (the service), `check_token_ids_in_vocab`. Each raises `TrainingInputError`, a ValueError whose
`field` names the offending value the way a client spells it, e.g.
`trajectory_groups[0].trajectories[3].messages_and_choices[2].token_ids[5]`.

Example:
    check_training_groups(groups)                 # before sending or queuing a step
    check_token_ids_in_vocab(groups, vocab_size)  # in the service, which knows the vocabulary
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from typing import Any

from openai.types.chat.chat_completion import Choice

from art.trajectories import TrajectoryGroup


class TrainingInputError(ValueError):
    """A value a training step cannot use; `field` names it (see the module docstring)."""

    def __init__(self, field: str, problem: str) -> None:
        super().__init__(f"{field}: {problem}")
        self.field = field


def _choices(groups: Sequence[TrajectoryGroup]) -> Iterator[tuple[str, Choice]]:
    """(where, choice) for every Choice of every trajectory, additional histories included."""
    for gi, group in enumerate(groups):
        for ti, trajectory in enumerate(group.trajectories):
            where = f"trajectory_groups[{gi}].trajectories[{ti}]"
            histories = [("messages_and_choices", trajectory.messages_and_choices)]
            histories += [
                (f"additional_histories[{k}].messages_and_choices", h.messages_and_choices)
                for k, h in enumerate(trajectory.additional_histories)
            ]
            for field, items in histories:
                for i, item in enumerate(items):
                    if isinstance(item, Choice):
                        yield f"{where}.{field}[{i}]", item


def _token_ids(where: str, choice: Choice) -> Iterator[tuple[str, Any]]:
    """(field, value) of every sampled token id the trainer would read from `choice`."""
    extra = choice.model_extra or {}
    ids = extra.get("token_ids", getattr(choice, "token_ids", None))
    if ids is not None:
        if not isinstance(ids, list | tuple):
            raise TrainingInputError(f"{where}.token_ids", f"must be a list of token ids, not {ids!r:.60}")
        for j, value in enumerate(ids):
            yield f"{where}.token_ids[{j}]", value
    elif choice.logprobs is not None and choice.logprobs.content:
        for j, entry in enumerate(choice.logprobs.content):
            token = entry.token
            if isinstance(token, str) and token.startswith("token_id:"):
                text = token.removeprefix("token_id:")
                yield (
                    f"{where}.logprobs.content[{j}].token",
                    int(text) if text.lstrip("-").isdigit() else text,
                )


def check_training_groups(groups: Sequence[TrajectoryGroup]) -> None:
    """Refuse a sampled token id that is not an integer >= 0, or a sampled logprob that is not a finite
    number <= 0 (`TrainingInputError` naming the field)."""
    for where, choice in _choices(groups):
        for field, value in _token_ids(where, choice):
            if not isinstance(value, int) or isinstance(value, bool) or value < 0:
                raise TrainingInputError(field, f"a token id must be an integer >= 0, not {value!r:.60}")
        if choice.logprobs is None or not choice.logprobs.content:
            continue
        for j, entry in enumerate(choice.logprobs.content):
            logprob = entry.logprob
            if (
                not isinstance(logprob, int | float)
                or isinstance(logprob, bool)
                or not math.isfinite(logprob)
                or logprob > 0
            ):
                raise TrainingInputError(
                    f"{where}.logprobs.content[{j}].logprob",
                    f"a sampled token's logprob must be a finite number <= 0, not {logprob!r:.60}",
                )


def check_token_ids_in_vocab(groups: Sequence[TrajectoryGroup], vocab_size: int) -> None:
    """Refuse a sampled token id outside the model's vocabulary, [0, vocab_size) (`TrainingInputError`)."""
    for where, choice in _choices(groups):
        for field, value in _token_ids(where, choice):
            if isinstance(value, int) and not 0 <= value < vocab_size:
                raise TrainingInputError(
                    field, f"token id {value} is outside this model's vocabulary (0 to {vocab_size - 1})"
                )
