"""POST /v1/completions for prompt-in clients, through the official openai client."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

torch = pytest.importorskip("torch")
openai = pytest.importorskip("openai")

from helpers_server import Served, float32_hf, hf_logprobs, serve_tiny  # noqa: E402


@pytest.fixture(scope="module")
def served(tiny_model_path: Path) -> Iterator[Served]:
    s = serve_tiny(tiny_model_path, "tiny")
    yield s
    s.close()


def test_a_text_prompt_gives_text_token_ids_and_raw_logprobs(served: Served, tiny_model_path: Path) -> None:
    completion = served.client.completions.create(
        model="tiny", prompt="The quick brown fox", seed=4, logprobs=2
    )
    [choice] = completion.choices
    extra = choice.model_extra
    prompt_ids = served.engine.tokenizer.encode("The quick brown fox")
    assert extra["prompt_token_ids"] == prompt_ids
    token_ids = extra["token_ids"]
    assert len(token_ids) == completion.usage.completion_tokens <= 16  # OpenAI's default max_tokens
    assert completion.usage.prompt_tokens == len(prompt_ids)
    visible = [t for t in token_ids if t not in served.engine._scheduler._stop_ids.tolist()]
    assert choice.text == served.engine.tokenizer.decode(visible, skip_special_tokens=True)
    expected = hf_logprobs(float32_hf(tiny_model_path), prompt_ids, token_ids)
    assert choice.logprobs.token_logprobs == pytest.approx(expected, abs=1e-4)
    assert len(choice.logprobs.tokens) == len(token_ids) == len(choice.logprobs.top_logprobs)
    assert all(len(top) <= 2 for top in choice.logprobs.top_logprobs)
    assert choice.logprobs.text_offset[0] == 0


def test_token_id_prompts_equal_their_text_and_batches_number_choices(served: Served) -> None:
    ids = served.engine.tokenizer.encode("hello world")
    as_text = served.client.completions.create(model="tiny", prompt="hello world", seed=9, max_tokens=8)
    as_ids = served.client.completions.create(model="tiny", prompt=ids, seed=9, max_tokens=8)
    assert as_ids.choices[0].model_extra["token_ids"] == as_text.choices[0].model_extra["token_ids"]
    batch = served.client.completions.create(
        model="tiny", prompt=["hello world", ids], n=2, seed=9, max_tokens=8
    )
    assert [c.index for c in batch.choices] == [0, 1, 2, 3]
    # prompt i's choice j samples with seed_j, as a request of that prompt alone does
    assert batch.choices[0].model_extra["token_ids"] == as_text.choices[0].model_extra["token_ids"]
    assert batch.choices[2].model_extra["token_ids"] == as_text.choices[0].model_extra["token_ids"]
    assert batch.usage.prompt_tokens == 2 * len(ids)


def test_streamed_completion_equals_non_streamed(served: Served) -> None:
    kwargs: dict[str, Any] = dict(model="tiny", prompt="tic tac toe", seed=5, max_tokens=20, n=2)
    whole = served.client.completions.create(**kwargs)
    texts, ids, prompts = ["", ""], [[], []], [None, None]
    for chunk in served.client.completions.create(**kwargs, stream=True):
        for c in chunk.choices:
            texts[c.index] += c.text
            ids[c.index] += c.model_extra.get("token_ids") or []
            prompts[c.index] = prompts[c.index] or c.model_extra.get("prompt_token_ids")
    for c in whole.choices:
        assert texts[c.index] == c.text and ids[c.index] == c.model_extra["token_ids"]
        assert prompts[c.index] == c.model_extra["prompt_token_ids"]


def test_structured_outputs_work_here_too(served: Served) -> None:
    completion = served.client.completions.create(
        model="tiny",
        prompt="Answer:",
        n=10,
        seed=1,
        max_tokens=100,
        extra_body={
            "guided_json": {
                "type": "object",
                "properties": {"ok": {"type": "boolean"}},
                "required": ["ok"],
                "additionalProperties": False,
            }
        },
    )
    for choice in completion.choices:
        assert isinstance(json.loads(choice.text)["ok"], bool)


@pytest.mark.parametrize(
    ("extra", "param"),
    [
        ({"echo": True}, "echo"),
        ({"suffix": "end"}, "suffix"),
        ({"best_of": 3}, "best_of"),
        ({"prompt": ""}, "prompt"),
        ({"prompt": []}, "prompt"),
        ({"prompt": [1, "a"]}, "prompt"),
        ({"prompt": [10**6]}, "prompt"),
        ({"prompt": [-1]}, "prompt"),
        ({"prompt": "word " * 1000}, "prompt"),  # over the context window, under the prompt size limit (413)
        ({"logprobs": True}, "logprobs"),
        ({"messages": []}, "messages"),
    ],
)
def test_bad_completion_requests_get_400(served: Served, extra: dict[str, Any], param: str) -> None:
    body = {"model": "tiny", "prompt": "hi", **extra}
    with pytest.raises(openai.BadRequestError) as info:
        served.client.completions.create(
            **{k: v for k, v in body.items() if k in ("model", "prompt")},
            extra_body={k: v for k, v in body.items() if k not in ("model", "prompt")},
        )
    assert info.value.body["param"] == param, info.value.body
