"""Rendering conversations (messages + tools) into text and token ids with a model's chat template.

This is the one place that turns messages into tokens, so the engine (which samples) and the trainer
(which re-renders trajectories) always agree. When a model's own template cannot render tools or tool
calls (SmolLM2's, for example), a built-in ChatML template with Hermes/Qwen-style tool support is used
instead: tools go into the system turn inside ``<tools></tools>``, calls are written as
``<tool_call>{"name": ..., "arguments": {...}}</tool_call>`` and tool results come back as user turns
holding ``<tool_response>...</tool_response>``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any, Protocol

# Qwen2.5-style ChatML with Hermes tool calling, written for this project. `default_system` is the system
# prompt used when a conversation has none (None: no system turn).
HERMES_CHATML_TEMPLATE = """\
{%- if messages and messages[0]['role'] in ('system', 'developer') -%}
  {%- set system = messages[0]['content'] or '' -%}
  {%- set rest = messages[1:] -%}
{%- else -%}
  {%- set system = default_system -%}
  {%- set rest = messages -%}
{%- endif -%}
{%- if tools -%}
<|im_start|>system
{% if system %}{{ system }}

{% endif %}# Tools

You may call one or more functions to assist with the user query.

You are provided with function signatures within <tools></tools> XML tags:
<tools>
{% for tool in tools %}{{ tool | tojson }}
{% endfor %}</tools>

For each function call, return a json object with function name and arguments within <tool_call></tool_call> XML tags:
<tool_call>
{"name": <function-name>, "arguments": <args-json-object>}
</tool_call><|im_end|>
{% elif system is not none -%}
<|im_start|>system
{{ system }}<|im_end|>
{% endif -%}
{%- for message in rest -%}
  {%- if message['role'] == 'assistant' -%}
    {{- '<|im_start|>assistant\n' + (message['content'] or '') -}}
    {%- for call in (message['tool_calls'] or []) -%}
      {%- if message['content'] or not loop.first -%}{{- '\n' -}}{%- endif -%}
      {{- '<tool_call>\n{"name": "' + call['function']['name'] + '", "arguments": ' + call['function']['arguments'] + '}\n</tool_call>' -}}
    {%- endfor -%}
    {{- '<|im_end|>\n' -}}
  {%- elif message['role'] == 'tool' -%}
    {%- if loop.first or rest[loop.index0 - 1]['role'] != 'tool' -%}{{- '<|im_start|>user' -}}{%- endif -%}
    {{- '\n<tool_response>\n' + message['content'] + '\n</tool_response>' -}}
    {%- if loop.last or rest[loop.index0 + 1]['role'] != 'tool' -%}{{- '<|im_end|>\n' -}}{%- endif -%}
  {%- else -%}
    {{- '<|im_start|>' + ('system' if message['role'] == 'developer' else message['role']) + '\n' + (message['content'] or '') + '<|im_end|>\n' -}}
  {%- endif -%}
{%- endfor -%}
{%- if add_generation_prompt -%}
<|im_start|>assistant
{% endif -%}
"""


class ChatTokenizer(Protocol):
    """The part of a Hugging Face tokenizer this module needs."""

    chat_template: str | None

    def apply_chat_template(self, conversation: Any, **kwargs: Any) -> Any: ...

    def encode(self, text: str, add_special_tokens: bool = ...) -> list[int]: ...


def template_supports_tools(template: str | None) -> bool:
    """Whether a Jinja chat template renders `tools` and assistant `tool_calls` itself."""
    return bool(template) and "tools" in template and "tool_calls" in template  # type: ignore[operator]


def _default_system_prompt(template: str | None) -> str | None:
    """The system prompt a ChatML template inserts when a conversation has none (SmolLM2 does)."""
    if not template:
        return None
    # The newline after "system" is a Jinja escape in templates from tokenizer_config.json, and a real
    # newline in some converted ones (the default model's GGUF); either way the same prompt.
    for marker in ("<|im_start|>system\\n", "<|im_start|>system\n"):
        start = template.find(marker)
        if start >= 0:
            break
    else:
        return None
    end = template.find("<|im_end|>", start)
    text = template[start + len(marker) : end]
    # Only a literal string counts; anything templated (e.g. "' + message['content'] + '") does not.
    if "'" in text or "{" in text or not text:
        return None
    return text


class ChatTemplate:
    """Renders conversations for one tokenizer; choose once per model with `ChatTemplate(tokenizer)`.

    `uses_builtin` tells whether the model's own template was replaced by the built-in Hermes/ChatML
    template because it cannot render tools.
    """

    def __init__(self, tokenizer: ChatTokenizer) -> None:
        self.tokenizer = tokenizer
        own = tokenizer.chat_template if isinstance(tokenizer.chat_template, str) else None
        if own is None:
            raise ValueError(
                "the tokenizer has no chat_template; set tokenizer.chat_template (a Jinja string) "
                "before serving or training this model"
            )
        self.uses_builtin = not template_supports_tools(own)
        self.template = HERMES_CHATML_TEMPLATE if self.uses_builtin else own
        self._extra: dict[str, Any] = (
            {"default_system": _default_system_prompt(own)} if self.uses_builtin else {}
        )
        self._variables: frozenset[str] | None = None

    def variables(self) -> frozenset[str]:
        """The names the template reads from its context (Jinja's undeclared variables): the switches a
        request's `chat_template_kwargs` could set. A kwarg not among them cannot change a rendering."""
        if self._variables is None:
            import jinja2
            import jinja2.meta

            source = jinja2.Environment().parse(self.template)
            self._variables = frozenset(jinja2.meta.find_undeclared_variables(source))
        return self._variables

    def render_text(
        self,
        messages: Sequence[Mapping[str, Any]],
        tools: Sequence[Mapping[str, Any]] | None = None,
        *,
        add_generation_prompt: bool = False,
    ) -> str:
        """The conversation as the model sees it, as text."""
        text = self.tokenizer.apply_chat_template(
            [dict(m) for m in messages],
            tools=[dict(t) for t in tools] if tools else None,
            chat_template=self.template,
            add_generation_prompt=add_generation_prompt,
            tokenize=False,
            **self._extra,
        )
        assert isinstance(text, str)
        return text

    def render_ids(
        self,
        messages: Sequence[Mapping[str, Any]],
        tools: Sequence[Mapping[str, Any]] | None = None,
        *,
        add_generation_prompt: bool = False,
    ) -> list[int]:
        """The conversation as token ids (special tokens come from the template text, none are added)."""
        text = self.render_text(messages, tools, add_generation_prompt=add_generation_prompt)
        return list(self.tokenizer.encode(text, add_special_tokens=False))


def normalize_tool_call_arguments(arguments: Any) -> str:
    """Arguments of a tool call as the JSON string OpenAI's format requires."""
    if isinstance(arguments, str):
        return arguments
    return json.dumps(arguments, ensure_ascii=False)
