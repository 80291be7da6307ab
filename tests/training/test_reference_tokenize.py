"""The reference's tokenizer (`art.preprocessing.tokenize`, ported in art.training.reference_tokenize) on a
real ChatML template: the sampled ids of each turn land where the template puts the turn, masked and with
their logprobs; a plain assistant dict is encoded from its text; SFT labels cover the responses only."""

from __future__ import annotations

import math
from typing import Any

import pytest

from art.preprocessing.tokenize import tokenize_sft_batch, tokenize_trajectory
from art.trajectories import History, Trajectory


def _masked(result: Any) -> list[int]:
    return [t for t, m in zip(result.token_ids, result.assistant_mask, strict=True) if m]


def test_sampled_turns_are_spliced_where_the_template_puts_them(tokenizer: Any, make_choice: Any) -> None:
    first, second = make_choice("Four."), make_choice("Yes, five.")
    items = [
        {"role": "user", "content": "2+2?"},
        first,
        {"role": "user", "content": "And 2+3?"},
        second,
    ]
    result = tokenize_trajectory(
        tokenizer, None, History(messages_and_choices=items), 1.0, False, Trajectory()
    )
    assert result is not None
    sampled = [*first.model_extra["token_ids"], *second.model_extra["token_ids"]]
    assert _masked(result) == sampled and len(result.choice_offsets) == 2
    # the whole rendering is the template's own (the sampled <|im_end|> kept once, not twice)
    rendered = tokenizer.apply_chat_template(
        items and History(messages_and_choices=items).messages(), tokenize=False
    )
    assert tokenizer.decode(result.token_ids) == rendered.rstrip("\n")
    trained = [lp for lp, m in zip(result.logprobs, result.assistant_mask, strict=True) if m]
    assert trained == [e.logprob for c in (first, second) for e in c.logprobs.content]
    assert all(math.isnan(lp) for lp, m in zip(result.logprobs, result.assistant_mask, strict=True) if not m)
    assert result.choice_offsets[0] == result.assistant_mask.index(1)


def test_a_plain_assistant_turn_is_encoded_only_when_allowed_and_never_with_tool_calls(
    tokenizer: Any,
) -> None:
    items = [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello there"}]
    history = History(messages_and_choices=items)
    assert tokenize_trajectory(tokenizer, None, history, 1.0, False, Trajectory()) is None
    result = tokenize_trajectory(tokenizer, None, history, 1.0, True, Trajectory())
    assert result is not None
    assert _masked(result) == tokenizer.encode("Hello there", add_special_tokens=False)
    call = {"id": "c", "type": "function", "function": {"name": "add", "arguments": "{}"}}
    with_calls = History(messages_and_choices=[items[0], {**items[1], "tool_calls": [call]}])
    with pytest.raises(ValueError, match="Assistant message has tool_calls"):
        tokenize_trajectory(tokenizer, None, with_calls, 1.0, True, Trajectory())


def test_sft_labels_cover_the_responses_only(tokenizer: Any) -> None:
    trajectory = Trajectory(
        messages_and_choices=[
            {"role": "user", "content": "Hi"},
            {"role": "assistant", "content": "Hello"},
            {"role": "user", "content": "Bye"},
            {"role": "assistant", "content": "Goodbye"},
        ]
    )
    batch = tokenize_sft_batch([trajectory], 1e-4, tokenizer, "<|im_start|>user\n", "<|im_start|>assistant\n")
    (row,) = batch.trajectory_tensors
    labels = [t for t in row["labels"][0].tolist() if t != -100]
    assert tokenizer.decode(labels) == "Hello<|im_end|>\nGoodbye<|im_end|>\n"
    assert batch.num_trainable_tokens == len(labels) and batch.num_tokens == row["input_ids"].shape[1]
    assert (
        tokenize_sft_batch([trajectory], 1e-4, tokenizer, "u", "a", max_seq_length=2).num_dropped_trajectories
        == 1
    )
