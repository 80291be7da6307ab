"""A model's `_internal_config["chat_template"]` / `["chat_template_path"]` (the reference's settings) is the
template LocalBackend serves and trains with; both at once, or with the vLLM engine, is refused clearly."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("torch", reason="needs the `local` extra: pip install -e '.[local]'")

import art
from art.local import LocalBackend
from art.local.backend import (
    _apply_configured_chat_template,
    _apply_configured_chat_template_server_args,
    _tokenizer_cache_key,
)

PROMPT = [{"role": "user", "content": "Reply with digits."}]
PREAMBLE = "You are a careful assistant who answers with digits only, " * 4


def with_preamble(model_path: Path) -> str:
    """The tiny model's own template, with a system preamble rendered before every conversation."""
    return (
        "{{- '<|im_start|>system\\n"
        + PREAMBLE
        + "<|im_end|>\\n' -}}"
        + (model_path / "chat_template.jinja").read_text()
    )


async def test_the_configured_template_is_served_and_trained_with(
    tiny_model_path: Path, tmp_path: Path
) -> None:
    from transformers import AutoTokenizer

    from art.chat.chat_template import ChatTemplate

    template = tmp_path / "template.jinja"
    template.write_text(with_preamble(tiny_model_path))
    tokenizer = AutoTokenizer.from_pretrained(str(tiny_model_path))

    def prompt_tokens(chat_template: str | None) -> int:  # as our server renders a prompt
        if chat_template is not None:
            tokenizer.chat_template = chat_template
        return len(ChatTemplate(tokenizer).render_ids(PROMPT, add_generation_prompt=True))

    plain, ours = prompt_tokens(None), prompt_tokens(template.read_text())
    assert ours > plain + 20
    custom = art.TrainableModel(
        name="custom", project="t", base_model=str(tiny_model_path),
        _internal_config={"chat_template_path": str(template)},
    )  # fmt: skip
    async with LocalBackend(path=str(tmp_path / "art"), progress=False) as backend:
        await custom.register(backend)
        response = await custom.openai_client().chat.completions.create(
            model=custom.get_inference_name(), messages=PROMPT, max_tokens=2
        )
        assert (
            response.usage is not None and response.usage.prompt_tokens == ours
        )  # the preamble was rendered

        choices = [
            (await custom.openai_client().chat.completions.create(
                model=custom.get_inference_name(), messages=PROMPT, max_tokens=3, seed=s  # type: ignore[arg-type]
            )).choices[0]
            for s in (1, 2)
        ]  # fmt: skip
        group = art.TrajectoryGroup(
            art.Trajectory(messages_and_choices=[*PROMPT, c], reward=float(i)) for i, c in enumerate(choices)
        )
        result = await backend.train(custom, [group], learning_rate=1e-3)
        # trained on the same rendering it served: every sampled token lined up, none re-tokenised
        assert (
            result.step == 1
            and result.metrics["trainable_turns"] == 2
            and result.metrics["unaligned_turns"] == 0
        )
        assert result.metrics["canary_logprob_diff"] < 0.05


async def test_both_template_settings_or_the_vllm_engine_are_refused(
    tiny_model_path: Path, tmp_path: Path
) -> None:
    both = {"chat_template": "x", "chat_template_path": str(tmp_path / "t.jinja")}
    with pytest.raises(ValueError, match="Set only one of chat_template or chat_template_path"):
        _apply_configured_chat_template(object(), both)
    model = art.TrainableModel(
        name="v", project="t", base_model=str(tiny_model_path), _internal_config={"chat_template": "x"}
    )
    with pytest.raises(ValueError, match="vLLM engine does not take"):
        await model.register(LocalBackend(path=str(tmp_path), engine="vllm", progress=False))


def test_the_references_helpers(tmp_path: Path) -> None:
    path = tmp_path / "t.jinja"
    path.write_text("first")

    class Tokenizer:
        chat_template = "base"

    tokenizer = Tokenizer()
    _apply_configured_chat_template(tokenizer, {"chat_template_path": str(path)})
    assert tokenizer.chat_template == "first"
    first = _tokenizer_cache_key("m", {"chat_template_path": str(path)})
    path.write_text("second")
    assert _tokenizer_cache_key("m", {"chat_template_path": str(path)}) != first
    config: dict[str, object] = {"server_args": {"chat_template": "mine"}}
    _apply_configured_chat_template_server_args(
        config, {"chat_template": "x", "chat_template_content_format": "string"}
    )
    assert config["server_args"] == {"chat_template": "mine", "chat_template_content_format": "string"}
