"""Supervised fine-tuning in the trainer: the assistant-token mask (token by token), the cross-entropy step,
batches and learning rates, bad data, streaming, and the optimizer reset between SFT and RL."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import torch
from helpers_tools import TOOLS

from art.chat.chat_template import ChatTemplate
from art.training.sft import SFTBatcher, SFTDataError, run_sft
from art.training.tokenize import TrajectoryTokenizer
from art.training.trainer import Trainer
from art.trajectories import History, Trajectory, TrajectoryGroup
from art.types import SFTSpec, TrainSpec
from art.utils.sft import create_lr_schedule

CALL = {"id": "call_0", "type": "function", "function": {"name": "add", "arguments": '{"a": 2, "b": 2}'}}


def conversation(make_choice: Any) -> list[Any]:
    """Multi-turn with a tool call, a tool result, a Choice and plain dict assistant turns."""
    return [
        {"role": "system", "content": "You add."},
        {"role": "user", "content": "What is 2+2?"},
        {"role": "assistant", "content": None, "tool_calls": [CALL]},
        {"role": "tool", "tool_call_id": "call_0", "content": "4"},
        {"role": "assistant", "content": "It is 4."},
        {"role": "user", "content": "And 3+3?"},
        make_choice("6, I think."),  # a sampled turn is trained on its text in SFT
        {"role": "user", "content": "Sure?"},
        {"role": "assistant", "content": "Yes."},
    ]


def test_last_turn_only_trains_the_final_assistant_turn(
    chat_template: ChatTemplate, make_choice: Any
) -> None:
    """`TrainSFTConfig(assistant_turns="last")` (openpipe-art 0.5.23's): the same conversation, only its
    final assistant turn (and its end-of-turn token) trained; every earlier one is context."""
    trajectory = Trajectory(messages_and_choices=conversation(make_choice), tools=TOOLS)
    tok = TrajectoryTokenizer(chat_template)
    (every,) = tok.tokenize_sft_trajectory(trajectory)
    (last,) = tok.tokenize_sft_trajectory(trajectory, last_turn_only=True)
    assert last.token_ids == every.token_ids
    trained = [i for i, m in enumerate(last.assistant_mask) if m]
    assert trained and set(trained) < {i for i, m in enumerate(every.assistant_mask) if m}
    assert chat_template.tokenizer.decode([last.token_ids[i] for i in trained]) == "Yes.<|im_end|>"
    assert SFTSpec(assistant_turns="last").assistant_turns == "last"


def test_mask_covers_exactly_the_assistant_tokens(tokenizer: Any, chat_template: ChatTemplate, make_choice):
    trajectory = Trajectory(messages_and_choices=conversation(make_choice), tools=TOOLS)
    sequences = TrajectoryTokenizer(chat_template).tokenize_sft_trajectory(trajectory)
    assert len(sequences) == 1
    seq = sequences[0]
    text = chat_template.render_text(trajectory.messages(), TOOLS)
    assert seq.token_ids == chat_template.render_ids(trajectory.messages(), TOOLS)  # the whole conversation

    # Independent oracle, from the text: each assistant turn's body and its <|im_end|>, not the "\n" after.
    spans = [
        (m.start(1), m.end(1))
        for m in re.finditer(r"<\|im_start\|>assistant\n(.*?<\|im_end\|>)", text, flags=re.DOTALL)
    ]
    assert len(spans) == 4
    encoded = tokenizer(text, add_special_tokens=False, return_offsets_mapping=True)
    assert encoded["input_ids"] == seq.token_ids
    expected = [any(a <= start and end <= b for a, b in spans) for start, end in encoded["offset_mapping"]]
    assert seq.assistant_mask == expected  # token by token
    trained = tokenizer.decode([t for t, m in zip(seq.token_ids, seq.assistant_mask, strict=True) if m])
    assert trained == (
        '<tool_call>\n{"name": "add", "arguments": {"a": 2, "b": 2}}\n</tool_call><|im_end|>'
        "It is 4.<|im_end|>6, I think.<|im_end|>Yes.<|im_end|>"
    )


def test_additional_histories_and_templates_that_rewrite_turns(
    tokenizer: Any, chat_template: ChatTemplate, tiny_model_path: Path
):
    from transformers import AutoTokenizer

    trajectory = Trajectory(
        messages_and_choices=[{"role": "user", "content": "hi"}, {"role": "assistant", "content": "7"}],
        additional_histories=[
            History(
                messages_and_choices=[{"role": "user", "content": "a"}, {"role": "assistant", "content": "8"}]
            )
        ],
    )
    sequences = TrajectoryTokenizer(chat_template).tokenize_sft_trajectory(trajectory)
    assert [
        tokenizer.decode([t for t, m in zip(s.token_ids, s.assistant_mask, strict=True) if m])
        for s in sequences
    ] == [
        "7<|im_end|>",
        "8<|im_end|>",
    ]
    # A template that drops earlier assistant turns' text: each turn becomes its own sequence, which is
    # exactly the rendered conversation up to that turn.
    forgetful = AutoTokenizer.from_pretrained(tiny_model_path)
    forgetful.chat_template = (
        "{% for m in messages %}<|im_start|>{{ m['role'] }}\n"
        "{% if m['role'] != 'assistant' or loop.last %}{{ m['content'] }}{% endif %}<|im_end|>\n"
        "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
        "{# tools tool_calls #}"
    )
    template = ChatTemplate(forgetful)
    two_turns = [
        {"role": "user", "content": "a"},
        {"role": "assistant", "content": "1"},
        {"role": "user", "content": "b"},
        {"role": "assistant", "content": "2"},
    ]
    with pytest.warns(UserWarning, match="renders earlier turns differently"):
        sequences = TrajectoryTokenizer(template).tokenize_sft_history(two_turns, None)
    assert [s.token_ids for s in sequences] == [
        template.render_ids(two_turns[:2]),
        template.render_ids(two_turns),
    ]
    assert [
        forgetful.decode([t for t, m in zip(s.token_ids, s.assistant_mask, strict=True) if m])
        for s in sequences
    ] == ["1<|im_end|>", "2<|im_end|>"]


# ---- batches, learning rates, bad data --------------------------------------------------------------


def example(answer: str, **metadata: Any) -> Trajectory:
    return Trajectory(
        messages_and_choices=[
            {"role": "user", "content": "Reply with a digit."},
            {"role": "assistant", "content": answer},
        ],
        metadata=metadata,
    )


def batcher(chat_template: ChatTemplate, **spec: Any) -> SFTBatcher:
    return SFTBatcher(TrajectoryTokenizer(chat_template).tokenize_sft_trajectory, SFTSpec(**spec))


def test_batches_by_count_and_by_token_budget(chat_template: ChatTemplate):
    items = [example(str(i % 10)) for i in range(7)]
    batches = list(batcher(chat_template, batch_size=3, learning_rate=[0.1, 0.2, 0.3]).batches(items))
    assert [b.num_trajectories for b in batches] == [3, 3, 1]
    assert [b.learning_rate for b in batches] == [0.1, 0.2, 0.3]
    length = len(batches[0].sequences[0])
    auto = list(batcher(chat_template, batch_size="auto", batch_tokens=2 * length).batches(items))
    assert [b.num_trajectories for b in auto] == [2, 2, 2, 1]
    assert all(b.num_tokens <= 2 * length for b in auto)
    with pytest.raises(SFTDataError, match=r"learning_rate has 2 values .* more than 2 batches"):
        list(batcher(chat_template, batch_size=3, learning_rate=[0.1, 0.2]).batches(items))


def test_batches_are_read_from_the_stream_one_at_a_time(chat_template: ChatTemplate):
    pulled: list[int] = []

    def stream() -> Iterator[Trajectory]:
        for i in range(100):
            pulled.append(i)
            yield example(str(i % 10))

    batches = batcher(chat_template, batch_size=4).batches(stream())
    first = next(batches)
    assert first.num_trajectories == 4 and len(pulled) == 5  # the batch, and the one that closed it


def test_bad_conversations_name_their_source_and_the_fix(chat_template: ChatTemplate):
    too_long = example("1 " * 400, source_file="data.jsonl", source_line=3)
    ends_with_user = Trajectory(messages_and_choices=[{"role": "user", "content": "hi"}])
    with pytest.raises(
        SFTDataError, match=r"data.jsonl, line 3: the conversation has \d+ tokens, more than max_seq_len=64"
    ):
        list(batcher(chat_template, batch_size=2, max_seq_len=64).batches([example("1"), too_long]))
    with pytest.raises(
        SFTDataError, match=r"trajectories\[1\]: messages_and_choices\[0\].role is 'user'.*skip_invalid=True"
    ):
        list(batcher(chat_template, batch_size=2).batches([example("1"), ends_with_user]))
    # skip_invalid: left out and counted, batches keep their place in the stream (schedules stay aligned)
    b = batcher(chat_template, batch_size=2, max_seq_len=64, skip_invalid=True, learning_rate=[0.1, 0.2])
    batches = list(b.batches([example("1"), too_long, ends_with_user, example("2")]))
    assert [(x.num_trajectories, x.num_dropped_trajectories, x.learning_rate) for x in batches] == [
        (1, 1, 0.1),
        (1, 1, 0.2),
    ]
    assert b.dropped_examples[0].startswith("data.jsonl, line 3: the conversation has")


# ---- the trainer ----------------------------------------------------------------------------------


def load_model(path: Path, dtype: torch.dtype = torch.float32) -> Any:
    from transformers import AutoModelForCausalLM

    return AutoModelForCausalLM.from_pretrained(path, dtype=dtype)


@pytest.fixture(scope="module")
def learnable_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from art.testing.tiny_model import make_tiny_model

    # Embeddings with a trained model's spread, so an adapter can make some tokens likely, and hidden size
    # 128: at 64 a 2-layer model's LoRA memorises two prompt-dependent answers too slowly for a unit test.
    return make_tiny_model(
        tmp_path_factory.mktemp("learnable"), embedding_std=0.1, hidden_size=128, intermediate_size=256
    )


def new_trainer(path: Path, dtype: torch.dtype = torch.float32) -> Trainer:
    from transformers import AutoTokenizer

    return Trainer(load_model(path, dtype), ChatTemplate(AutoTokenizer.from_pretrained(path)))


@pytest.fixture()
def learnable_trainer(learnable_path: Path) -> Trainer:
    return new_trainer(learnable_path)


@pytest.fixture(params=[torch.float32, torch.bfloat16], ids=["float32", "bfloat16"])
def learnable_trainer_any_dtype(learnable_path: Path, request: pytest.FixtureRequest) -> Trainer:
    """The learnable model in float32 and in bf16 (emulated where the CPU lacks it: fine for a tiny model)."""
    return new_trainer(learnable_path, request.param)


def answer_logprob(trainer: Trainer, trajectory: Trajectory) -> float:
    seq = trainer.tokenizer.tokenize_sft_trajectory(trajectory)[0]
    logprobs = trainer.logprobs(seq.token_ids)
    return sum(lp for lp, m in zip(logprobs, seq.assistant_mask[1:], strict=True) if m)


def test_sft_learns_a_memorisable_set_and_reports_per_batch(learnable_trainer_any_dtype: Trainer):
    learnable_trainer = learnable_trainer_any_dtype
    data = [
        Trajectory(messages_and_choices=[{"role": "user", "content": q}, {"role": "assistant", "content": a}])
        for q, a in [("What is the digit?", "7"), ("The quick brown fox", "dog")]
    ]
    before = [answer_logprob(learnable_trainer, t) for t in data]
    # A decaying rate: at a constant 1e-2 AdamW oscillates between the two answers in either dtype, and where
    # the 12th step lands was a coin flip (4 of 6 seeds passed in float32, 3 of 6 in bf16; decaying: 6 and 6).
    schedule = create_lr_schedule(12, 1e-2, "linear", min_lr=1e-3)
    report = run_sft(
        learnable_trainer, data * 12, SFTSpec(batch_size=2, learning_rate=schedule), progress=False
    )
    losses = [m["loss"] for m in report.batch_metrics]
    assert len(losses) == 12 and report.updated
    assert losses[-1] < 0.1 * losses[0], losses
    after = [answer_logprob(learnable_trainer, t) for t in data]
    assert all(a > -3.0 and a > b + 10.0 for a, b in zip(after, before, strict=True)), (before, after)
    assert report.metrics["data/step_num_gradient_steps"] == 12
    assert report.metrics["data/step_num_trajectories"] == 24
    assert report.metrics["loss/train"] == pytest.approx(sum(losses) / 12)
    assert report.metrics["data/step_trainer_tokens"] == sum(
        m["num_trainable_tokens"] for m in report.batch_metrics
    )
    assert learnable_trainer.optimizer_steps == 12 and learnable_trainer.training_mode == "sft"


def test_the_sft_loss_is_the_mean_cross_entropy_of_assistant_tokens(learnable_trainer: Trainer):
    data = [example("7"), example("42 is the answer")]
    sequences = [s for t in data for s in learnable_trainer.tokenizer.tokenize_sft_trajectory(t)]
    expected = []
    for seq in sequences:
        logprobs = learnable_trainer.logprobs(seq.token_ids)
        expected += [-lp for lp, m in zip(logprobs, seq.assistant_mask[1:], strict=True) if m]
    report = learnable_trainer.sft_step(sequences, SFTSpec(micro_batch_tokens=16), learning_rate=1e-3)
    assert report.metrics["num_micro_batches"] == 2  # one sequence each: the mean is over both
    assert report.metrics["loss"] == pytest.approx(sum(expected) / len(expected), rel=1e-4)


def rl_groups(trainer: Trainer, make_choice: Any) -> list[TrajectoryGroup]:
    prompt = [{"role": "user", "content": "Reply with a digit."}]
    return [
        TrajectoryGroup(
            [
                Trajectory(messages_and_choices=[*prompt, make_choice(d)], reward=r)
                for d, r in (("7", 1.0), ("3", 0.0))
            ]
        )
    ]


def adam_steps(trainer: Trainer) -> set[float]:
    return {float(state["step"]) for state in trainer.optimizer.state.values()}


def test_switching_between_sft_and_rl_resets_the_optimizer(
    learnable_trainer: Trainer, learnable_path: Path, make_choice: Any, tmp_path: Path
):
    spec = SFTSpec(batch_size=1, learning_rate=1e-3)
    run_sft(learnable_trainer, [example("7"), example("8")], spec, progress=False)
    assert adam_steps(learnable_trainer) == {2.0}
    rl = learnable_trainer.train_step(rl_groups(learnable_trainer, make_choice), TrainSpec(), current_step=1)
    assert rl.metrics["optimizer_reset"] == 1.0 and adam_steps(learnable_trainer) == {1.0}  # fresh moments
    rl = learnable_trainer.train_step(rl_groups(learnable_trainer, make_choice), TrainSpec(), current_step=2)
    assert rl.metrics["optimizer_reset"] == 0.0 and adam_steps(learnable_trainer) == {2.0}  # RL keeps its own
    report = run_sft(learnable_trainer, [example("7")], spec, progress=False)
    assert report.batch_metrics[0]["optimizer_reset"] == 1.0 and adam_steps(learnable_trainer) == {1.0}
    # The mode survives a checkpoint: a resumed trainer resets on the same rule.
    learnable_trainer.save(tmp_path / "ckpt")
    assert json.loads((tmp_path / "ckpt" / "trainer_state.json").read_text())["training_mode"] == "sft"
    resumed = new_trainer(learnable_path)
    resumed.load(tmp_path / "ckpt")
    assert resumed.training_mode == "sft" and adam_steps(resumed) == {1.0}
    rl = resumed.train_step(rl_groups(resumed, make_choice), TrainSpec(), current_step=4)
    assert rl.metrics["optimizer_reset"] == 1.0 and adam_steps(resumed) == {1.0}
