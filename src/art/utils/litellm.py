"""`convert_litellm_choice_to_openai(choice)`: a LiteLLM `Choices` as an OpenAI `Choice`, logprobs and tool
calls included, so a turn sampled through LiteLLM (e.g. with `model.litellm_completion_params()`) can go
into a trajectory's `messages_and_choices` and be trained on. The reference's helper; needs the `judge`
extra (litellm). Extra fields our server adds (`token_ids`, `checkpoint_step`) are kept when present.

    response = await litellm.acompletion(messages=msgs, **model.litellm_completion_params())
    trajectory.messages_and_choices.append(convert_litellm_choice_to_openai(response.choices[0]))
"""

from __future__ import annotations

from typing import Any

from openai.types.chat.chat_completion import Choice


def _plain(value: Any) -> Any:
    """A LiteLLM object (pydantic or dict-like) as plain data."""
    if hasattr(value, "model_dump"):
        return value.model_dump()
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return value


def convert_litellm_choice_to_openai(litellm_choice: Any) -> Choice:
    """The OpenAI `Choice` for a non-streamed LiteLLM choice (`litellm.types.utils.Choices`).

    Raises ValueError for a streamed choice (`StreamingChoices`) or a message that is not the assistant's.
    """
    from litellm.types.utils import Choices

    if not isinstance(litellm_choice, Choices):
        raise ValueError(
            f"convert_litellm_choice_to_openai takes a non-streamed litellm Choices, got "
            f"{type(litellm_choice).__name__}; call litellm without stream=True"
        )
    message = litellm_choice.message
    if message.role != "assistant":
        raise ValueError(f"only assistant messages convert to an OpenAI Choice, got role {message.role!r}")
    tool_calls = None
    if message.tool_calls:
        tool_calls = []
        for call in message.tool_calls:
            function = getattr(call, "function", None)
            if call.type != "function" or function is None or function.name is None:
                raise ValueError(f"only named function tool calls convert, got {call.type!r}")
            tool_calls.append(
                {
                    "id": call.id,
                    "type": "function",
                    "function": {"name": function.name, "arguments": function.arguments},
                }
            )
    logprobs = getattr(litellm_choice, "logprobs", None)
    body: dict[str, Any] = {
        "index": litellm_choice.index,
        "finish_reason": litellm_choice.finish_reason,
        "message": {"role": "assistant", "content": message.content, "tool_calls": tool_calls},
        "logprobs": None if logprobs is None else _plain(logprobs),
    }
    for extra in ("token_ids", "checkpoint_step"):  # ART's server: exact sampled ids, and their step
        value = getattr(litellm_choice, extra, None)
        provider_fields = getattr(litellm_choice, "provider_specific_fields", None)
        if value is None and isinstance(provider_fields, dict):
            value = provider_fields.get(extra)
        if value is not None:
            body[extra] = value
    return Choice.model_validate(body)
