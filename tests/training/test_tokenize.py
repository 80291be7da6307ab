"""Tokenisation: spliced sampled ids, assistant masks and logprobs, checked token by token."""

from __future__ import annotations

import math
from typing import Any

import pytest
from helpers_tools import TOOLS

from art.chat.chat_template import ChatTemplate
from art.training import tokenize as tokenize_module
from art.training.tokenize import TokenizeStats, TrajectoryTokenizer
from art.trajectories import History, Trajectory

CALL_TEXT = '<tool_call>\n{"name": "add", "arguments": {"a": 2, "b": 2}}\n</tool_call>'
CALL = {"id": "call_0", "type": "function", "function": {"name": "add", "arguments": '{"a": 2, "b": 2}'}}


def enc(tokenizer: Any, text: str) -> list[int]:
    return list(tokenizer.encode(text, add_special_tokens=False))


@pytest.fixture()
def tok(chat_template: ChatTemplate) -> TrajectoryTokenizer:
    return TrajectoryTokenizer(chat_template)


def test_multi_turn_with_tool_calls_token_by_token(
    tokenizer: Any, chat_template: ChatTemplate, tok, make_choice
):
    eos = tokenizer.eos_token_id
    # Turn 0 was sampled character by character: a valid tokenisation that differs from re-encoding its
    # text, so the test proves the sampled ids are spliced in, not re-tokenised ones.
    s0 = [i for ch in CALL_TEXT for i in enc(tokenizer, ch)] + [eos]
    assert s0[:-1] != enc(tokenizer, CALL_TEXT)
    s1 = [*enc(tokenizer, "It is 4."), eos]
    s2 = enc(tokenizer, "Yes")  # stopped by max_tokens: no end-of-turn token sampled
    lp0 = [-0.01 * (k + 1) for k in range(len(s0))]
    lp1 = [-0.5 - k for k in range(len(s1))]
    lp2 = [-2.0, -3.0][: len(s2)] + [-4.0] * (len(s2) - 2)
    items: list[Any] = [
        {"role": "system", "content": "You add."},
        {"role": "user", "content": "What is 2+2?"},
        make_choice(None, ids=s0, logprobs=lp0, tool_calls=[CALL], finish_reason="tool_calls"),
        {"role": "tool", "tool_call_id": "call_0", "content": "4"},
        make_choice("It is 4.", ids=s1, logprobs=lp1),
        {"role": "user", "content": "And 3+3?"},
        {"role": "assistant", "content": "6."},  # written by hand: context, not trained
        {"role": "user", "content": "Sure?"},
        make_choice("Yes", ids=s2, logprobs=lp2, finish_reason="length"),
        {"role": "user", "content": "Bye"},  # after the last trainable turn: dropped
        {"role": "assistant", "content": "Bye."},
    ]
    traj = Trajectory(messages_and_choices=items, tools=TOOLS, reward=1.0)
    sequences, stats = tok.tokenize_trajectory(traj, advantage=0.5, group_index=2, trajectory_index=3)
    assert len(sequences) == 1 and stats.trainable_turns == 3 and stats.split_histories == 0
    seq = sequences[0]

    p0 = chat_template.render_ids(traj.messages()[:2], TOOLS, add_generation_prompt=True)
    assert tokenizer.decode(p0).endswith(
        "<|im_end|>\n<|im_start|>user\nWhat is 2+2?<|im_end|>\n<|im_start|>assistant\n"
    )
    d0 = enc(
        tokenizer,
        "\n<|im_start|>user\n<tool_response>\n4\n</tool_response><|im_end|>\n<|im_start|>assistant\n",
    )
    d1 = enc(
        tokenizer,
        "\n<|im_start|>user\nAnd 3+3?<|im_end|>\n<|im_start|>assistant\n6.<|im_end|>\n"
        "<|im_start|>user\nSure?<|im_end|>\n<|im_start|>assistant\n",
    )
    expected = p0 + s0 + d0 + s1 + d1 + s2
    assert seq.token_ids == expected
    expected_mask = (
        [False] * len(p0)
        + [True] * len(s0)
        + [False] * len(d0)
        + [True] * len(s1)
        + [False] * len(d1)
        + [True] * len(s2)
    )
    assert seq.assistant_mask == expected_mask
    for i, (m, lp) in enumerate(zip(seq.assistant_mask, seq.sampled_logprobs, strict=True)):
        assert m == (not math.isnan(lp)), i
    assert [lp for lp in seq.sampled_logprobs if not math.isnan(lp)] == lp0 + lp1 + lp2
    # The whole sequence reads exactly as the engine's prompt for the last turn plus what it sampled.
    assert (
        tokenizer.decode(seq.token_ids)
        == chat_template.render_text(traj.messages()[:8], TOOLS, add_generation_prompt=True) + "Yes"
    )
    assert (seq.advantage, seq.group_index, seq.trajectory_index) == (0.5, 2, 3)


def test_additional_histories_are_separate_sequences(tokenizer, tok, make_choice):
    traj = Trajectory(
        messages_and_choices=[{"role": "user", "content": "hi"}, make_choice("hello")],
        additional_histories=[
            History(messages_and_choices=[{"role": "user", "content": "sub task"}, make_choice("done")]),
            History(messages_and_choices=[{"role": "user", "content": "no choice"}]),  # nothing to train
        ],
    )
    sequences, _ = tok.tokenize_trajectory(traj, advantage=-1.5)
    assert len(sequences) == 2
    assert [s.advantage for s in sequences] == [-1.5, -1.5]
    assert [s.num_assistant_tokens for s in sequences] == [
        len(enc(tokenizer, w)) + 1 for w in ("hello", "done")
    ]
    assert sequences[1].token_ids[-1] == tokenizer.eos_token_id


def test_dict_assistant_turns_are_context_and_no_choice_means_nothing(tok):
    traj = Trajectory(
        messages_and_choices=[{"role": "user", "content": "hi"}, {"role": "assistant", "content": "7"}]
    )
    assert tok.tokenize_trajectory(traj)[0] == []


def test_choice_without_token_ids_is_retokenised_when_logprobs_line_up(
    tokenizer, tok, make_choice, monkeypatch
):
    ids = [*enc(tokenizer, "hello world"), tokenizer.eos_token_id]
    choice = make_choice("hello world", ids=ids, token_ids=False)
    monkeypatch.setattr(tokenize_module, "_warned", set())
    with pytest.warns(UserWarning, match="no `token_ids`; its text was re-tokenised"):
        seq = tok.tokenize_history(
            [{"role": "user", "content": "hi"}, choice], None, stats := TokenizeStats()
        )[0]
    assert stats.retokenized_turns == 1 and stats.unaligned_turns == 0
    assert seq.token_ids[-len(ids) :] == ids and seq.num_assistant_tokens == len(ids)


def test_choice_with_token_id_strings(tokenizer, tok, make_choice):
    ids = [*enc(tokenizer, "7"), tokenizer.eos_token_id]
    choice = make_choice("7", ids=ids, token_ids=False, logprob_tokens=[f"token_id:{i}" for i in ids])
    stats = TokenizeStats()
    seq = tok.tokenize_history([{"role": "user", "content": "hi"}, choice], None, stats)[0]
    assert (
        stats.retokenized_turns == 0
        and seq.token_ids[-len(ids) :] == ids
        and seq.num_assistant_tokens == len(ids)
    )


def test_unaligned_logprobs_are_not_trained(tokenizer, tok, make_choice, monkeypatch):
    ids = [*enc(tokenizer, "hello world"), tokenizer.eos_token_id]
    choice = make_choice("hello world", ids=ids, logprobs=[-1.0], token_ids=False)  # too few entries
    stats = TokenizeStats()
    monkeypatch.setattr(tokenize_module, "_warned", set())
    with pytest.warns(UserWarning, match="do not line up"):
        out = tok.tokenize_history([{"role": "user", "content": "hi"}, choice], None, stats)
    assert out == [] and stats.unaligned_turns == 1


def test_stop_token_without_logprob_is_context(tokenizer, tok, make_choice, monkeypatch):
    ids = [*enc(tokenizer, "7"), tokenizer.eos_token_id]
    choice = make_choice("7", ids=ids, logprobs=[-0.3] * (len(ids) - 1))
    monkeypatch.setattr(tokenize_module, "_warned", set())
    with pytest.warns(UserWarning, match="one more token id than logprobs"):
        seq = tok.tokenize_history([{"role": "user", "content": "hi"}, choice], None)[0]
    assert seq.token_ids[-len(ids) :] == ids
    assert seq.assistant_mask[-len(ids) :] == [True] * (len(ids) - 1) + [False]


REWRITING_TEMPLATE = r"""{#- renders tools and tool_calls, and strips reasoning from earlier assistant turns -#}
{%- for message in messages -%}
{%- if message['role'] == 'assistant' -%}
{%- set content = message['content'] or '' -%}
{%- if not loop.last and '</think>' in content -%}{%- set content = content.split('</think>')[-1] -%}{%- endif -%}
{{- '<|im_start|>assistant\n' + content + '<|im_end|>\n' -}}
{%- else -%}
{{- '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>\n' -}}
{%- endif -%}
{%- endfor -%}
{%- if add_generation_prompt -%}{{- '<|im_start|>assistant\n' -}}{%- endif -%}"""


def test_template_that_rewrites_turns_warns_once_and_splits(tiny_model_path, make_choice, monkeypatch):
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(tiny_model_path)
    tokenizer.chat_template = REWRITING_TEMPLATE
    template = ChatTemplate(tokenizer)
    assert not template.uses_builtin
    monkeypatch.setattr(tokenize_module, "_warned", set())
    with pytest.warns(
        UserWarning, match=f"chat template of {tiny_model_path}.*renders earlier turns differently"
    ):
        tok = TrajectoryTokenizer(template)
    assert not tok.template_ok
    first = make_choice("<think>x</think>hi")
    items = [{"role": "user", "content": "a"}, first, {"role": "user", "content": "b"}, make_choice("ok")]
    stats = TokenizeStats()
    sequences = tok.tokenize_history(items, None, stats)  # no second warning: already warned for this model
    assert stats.split_histories == 1 and len(sequences) == 2
    messages = Trajectory(messages_and_choices=items).messages()
    for k, (seq, index) in enumerate(zip(sequences, (1, 3), strict=True)):
        prompt = template.render_ids(messages[:index], add_generation_prompt=True)
        sampled = items[index].model_extra["token_ids"]
        assert seq.token_ids == prompt + sampled, k
        assert seq.assistant_mask == [False] * len(prompt) + [True] * len(sampled)


def test_builtin_template_passes_the_check(tok):
    assert tok.template_ok and tok.closing_ids  # ChatML: <|im_end|> then a newline
