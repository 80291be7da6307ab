"""The chat template keeps a model's default system prompt when the built-in tool template replaces its own."""

from __future__ import annotations

from pathlib import Path

import pytest

from art.chat.chat_template import ChatTemplate

# SmolLM2's own template (no tools): it inserts a system prompt when the conversation has none.
SMOLLM2 = (
    "{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}"
    "{{ '<|im_start|>system\\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face"
    "<|im_end|>\\n' }}{% endif %}{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + "
    "'<|im_end|>' + '\\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}"
    "{% endif %}"
)


@pytest.mark.parametrize(
    "template",
    [SMOLLM2, SMOLLM2.replace("\\n", "\n")],
    ids=["jinja-escaped newlines (tokenizer_config.json)", "real newlines (converted from GGUF)"],
)
def test_builtin_template_keeps_the_models_default_system_prompt(
    tiny_model_path: Path, template: str
) -> None:
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(tiny_model_path)
    tokenizer.chat_template = template
    chat = ChatTemplate(tokenizer)
    assert chat.uses_builtin  # SmolLM2's template cannot render tools
    user_only = [{"role": "user", "content": "What is 12 times 12?"}]
    own = tokenizer.apply_chat_template(user_only, tokenize=False, add_generation_prompt=True)
    assert "You are a helpful AI assistant named SmolLM" in own
    assert chat.render_text(user_only, add_generation_prompt=True) == own
    with_system = [{"role": "system", "content": "Be brief."}, *user_only]
    assert "SmolLM" not in chat.render_text(with_system, add_generation_prompt=True)
