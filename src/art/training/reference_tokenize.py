"""The reference's tokenizer for its Unsloth trainer, `art.preprocessing.tokenize`: its names, arguments and
results, for code (and tests) written against it. ART's own trainer does not use it: it tokenises with
`art.training.tokenize`, which splices the sampled ids into the real template's rendering and checks them.

How the reference's design works, and so this one:
- `tokenize_trajectory` renders the conversation up to its last trainable assistant turn twice: once as text
  (`chat`) and once with every trainable assistant turn's content replaced by a *sentinel*, a token id the
  plain rendering never uses. Each sentinel is then swapped for the turn's tokens: the sampled ids of a
  `Choice` (from its logprobs, `token_id:N` or token strings) with their logprobs, or, with
  `allow_training_without_logprobs`, a plain assistant dict's content re-encoded (logprobs NaN). Those tokens
  are the assistant mask. A plain dict with `tool_calls` cannot be encoded that way and is refused.
- A final sampled turn that made tool calls is rendered from its content only (its exact tokens replace it,
  so malformed arguments never reach the template); a template that iterates `tool_call.arguments|items`
  gets every earlier call's arguments as a mapping instead of a JSON string.
- `tokenize_sft_batch` renders each conversation whole and trains the tokens after each `response_part`
  up to the next `instruction_part` (Unsloth's `train_on_responses_only`).
Images (`image_processor`) are not supported here: ART's trainer is text-only.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, Literal

import torch
from openai.types.chat.chat_completion import Choice

from art.training.tokenize import sampled_token_ids
from art.trajectories import History, Trajectory, get_messages

ChatTemplateToolSchemaFormat = Literal["default", "vllm_openai"]
IGNORE_INDEX = -100  # labels not trained (PyTorch's cross-entropy ignore_index)


@dataclass
class TokenizedResult:
    """One tokenised trajectory, as the reference's trainer takes it: ids, a 0/1 assistant mask, the sampled
    logprobs (NaN where nothing was sampled), and where each sampled turn starts (`choice_offsets`)."""

    advantage: float
    chat: str
    token_ids: list[int]
    input_pos: list[int]
    assistant_mask: list[int]
    logprobs: list[float]
    pixel_values: torch.Tensor | None
    image_grid_thw: torch.Tensor | None
    trajectory: Trajectory
    choice_offsets: list[int]
    extra_logprobs: dict[str, list[float]]
    _tokenizer: Any = field(repr=False, compare=False)
    weight: float = 0.0
    prompt_id: int = 0
    prompt_length: int = 0

    @cached_property
    def tokens(self) -> list[str]:
        """Each token id decoded on its own."""
        return [str(self._tokenizer.decode(token_id)) for token_id in self.token_ids]

    def without_prompt(self) -> TokenizedResult:
        """The same result with its first `prompt_length` tokens (a shared prompt) left out."""
        cut = self.prompt_length
        return TokenizedResult(
            advantage=self.advantage,
            chat=self.chat,
            token_ids=self.token_ids[cut:],
            input_pos=self.input_pos[cut:],
            assistant_mask=self.assistant_mask[cut:],
            logprobs=self.logprobs[cut:],
            pixel_values=None,
            image_grid_thw=None,
            trajectory=self.trajectory,
            choice_offsets=self.choice_offsets,
            extra_logprobs={key: values[cut:] for key, values in self.extra_logprobs.items()},
            _tokenizer=self._tokenizer,
            weight=self.weight,
            prompt_id=self.prompt_id,
            prompt_length=0,
        )


@dataclass
class SFTBatch:
    """A batch for supervised fine-tuning: per trajectory a dict of `input_ids`, `attention_mask` and
    `labels` tensors (shape 1 x length; labels -100 where not trained), and the batch's counts."""

    trajectory_tensors: list[dict[str, torch.Tensor]]
    learning_rate: float
    num_trajectories: int
    num_tokens: int
    num_trainable_tokens: int
    num_dropped_trajectories: int = 0


# ---- rendering ----------------------------------------------------------------------------------------
def _template_kwargs(tokenizer: Any, overrides: Mapping[str, Any] | None) -> dict[str, Any]:
    """The reference's defaults (thinking off but kept, where the template knows those switches), then
    the caller's."""
    template = getattr(tokenizer, "chat_template", None)
    defaults: dict[str, Any] = {}
    if isinstance(template, str):
        if "enable_thinking" in template:
            defaults["enable_thinking"] = False
        if "preserve_thinking" in template:
            defaults["preserve_thinking"] = True
    return {**defaults, **(overrides or {})}


def _tools(tools: Sequence[Any] | None, schema_format: ChatTemplateToolSchemaFormat) -> list[Any] | None:
    """Tools as chat templates want them: `{"type": "function", "function": ...}`; "vllm_openai" orders a
    function's keys as vLLM's OpenAI server does (name, description, parameters, strict, the rest)."""
    if schema_format not in ("default", "vllm_openai"):
        raise ValueError(f"Unknown chat template tool schema format: {schema_format}")
    if tools is None:
        return None
    out: list[Any] = []
    for tool in tools:
        if not callable(tool) and not (isinstance(tool, dict) and "type" in tool):
            tool = {"type": "function", "function": tool}
        function = tool.get("function") if isinstance(tool, dict) else None
        if schema_format == "vllm_openai" and tool.get("type") == "function" and isinstance(function, dict):
            order = ("name", "description", "parameters", "strict")
            ordered = {k: function[k] for k in order if k in function}
            ordered.update({k: v for k, v in function.items() if k not in ordered})
            tool = {
                "type": "function",
                "function": ordered,
                **{k: v for k, v in tool.items() if k != "function"},
            }
        out.append(tool)
    return out


def _messages(
    tokenizer: Any, items: Sequence[Any], *, final_choice_plain: bool = False
) -> list[dict[str, Any]]:
    """Plain messages for the template; the last one as content only when `final_choice_plain`; tool call
    arguments as mappings when the template iterates `tool_call.arguments|items`."""
    messages: list[dict[str, Any]] = [dict(m) for m in get_messages(items)]
    if final_choice_plain and messages and messages[-1].get("tool_calls"):
        messages[-1] = {"role": "assistant", "content": messages[-1].get("content") or ""}
    template = getattr(tokenizer, "chat_template", None)
    if not (isinstance(template, str) and "tool_call.arguments|items" in template):
        return messages
    for message in messages:
        calls = message.get("tool_calls")
        if calls:
            message["tool_calls"] = [
                {**call, "function": {**call["function"], "arguments": _arguments(call)}} for call in calls
            ]
    return messages


def _arguments(call: Mapping[str, Any]) -> dict[str, Any]:
    arguments = call["function"]["arguments"]
    parsed = json.loads(arguments) if isinstance(arguments, str) else arguments
    if not isinstance(parsed, dict):
        raise ValueError(f"tool call {call['function'].get('name')!r}: its arguments are not a JSON object")
    return parsed


def _token_ids(tokenizer: Any, messages: list[dict[str, Any]], **kwargs: Any) -> list[int]:
    """`apply_chat_template`'s ids, whether it answers a list, a nested list, a tensor or a BatchEncoding."""
    output = tokenizer.apply_chat_template(messages, **kwargs)
    if isinstance(output, Mapping):
        output = output["input_ids"]
    if isinstance(output, torch.Tensor):
        output = output.tolist()
    ids = list(output)
    if ids and isinstance(ids[0], list):
        if len(ids) != 1:
            raise ValueError(f"apply_chat_template returned {len(ids)} sequences for one conversation")
        ids = ids[0]
    return [int(i) for i in ids]


# ---- one trajectory -----------------------------------------------------------------------------------
def _counts(item: Any, without_logprobs: bool) -> bool:
    """Whether `item` can end the part of the conversation that is tokenised (a trainable assistant turn)."""
    if isinstance(item, Choice):
        return item.logprobs is not None or without_logprobs
    return without_logprobs and isinstance(item, dict) and item.get("role") == "assistant"


def _swapped(item: Any, without_logprobs: bool) -> bool:
    """Whether `item`'s content is replaced by the sentinel (and then by its tokens): a sampled turn with
    logprobs, or a plain assistant dict when training without logprobs is allowed."""
    if isinstance(item, Choice):
        return item.logprobs is not None
    return without_logprobs and isinstance(item, dict) and item.get("role") == "assistant"


def _sampled_ids(tokenizer: Any, choice: Choice, entries: Sequence[Any]) -> list[int]:
    """The sampled ids of a Choice: the `token_ids` ART's server attaches, else its logprob entries'
    `token_id:N` (vLLM's `return_tokens_as_token_ids`), else their token strings looked up in the
    vocabulary (unknown ones as the EOS token)."""
    attached = sampled_token_ids(choice)
    if attached is not None and len(attached) == len(entries):
        return attached
    try:
        return [int(entry.token.split(":")[1]) for entry in entries]
    except (IndexError, ValueError):
        found = tokenizer.convert_tokens_to_ids([entry.token or tokenizer.eos_token for entry in entries])
        return [tokenizer.eos_token_id if i is None else int(i) for i in found]


def _entry_text(entry: Any) -> str:
    return bytes(entry.bytes).decode("utf-8", errors="replace") if entry.bytes else str(entry.token)


def _think_start(tokenizer: Any, ids: list[int], start: int, floor: int, entries: Sequence[Any]) -> int:
    """A sampled turn that opens with `<think>` where the template already wrote an (empty) think block
    before the content: the turn starts at the template's `<think>` (within 8 tokens), which it replaces."""
    if not entries or _entry_text(entries[0]) != "<think>":
        return start
    for position in range(start - 1, max(floor, start - 8) - 1, -1):
        if tokenizer.decode(ids[position]) == "<think>":
            return position
    return start


@dataclass
class _Splice:
    """The sentinel rendering being turned into the trajectory's tokens, turn by turn."""

    ids: list[int]
    sentinel: int
    mask: list[int] = field(default_factory=list)
    logprobs: list[float] = field(default_factory=list)
    cursor: int = 0
    choices: list[tuple[int, Sequence[Any]]] = field(default_factory=list)  # (offset, logprob entries)

    def __post_init__(self) -> None:
        self.mask = [0] * len(self.ids)
        self.logprobs = [math.nan] * len(self.ids)

    def next_sentinel(self) -> int:
        try:
            return self.ids.index(self.sentinel, self.cursor)
        except ValueError:
            raise ValueError(
                "the chat template dropped an assistant turn's content (its sentinel token is not in the "
                "rendering), so its tokens cannot be placed"
            ) from None

    def put(self, start: int, stop: int, new: list[int], logprobs: list[float], dedupe_next: bool) -> None:
        """Replace ids[start:stop] by `new` (trained); with `dedupe_next`, a last sampled token that the
        template also wrote right after the turn (its end-of-turn token) is kept once."""
        following = self.ids[stop] if stop < len(self.ids) else None
        self.ids[start:stop] = new
        self.mask[start:stop] = [1] * len(new)
        self.logprobs[start:stop] = logprobs
        end = start + len(new)
        if dedupe_next and new and following is not None and new[-1] == following:
            del self.ids[end], self.mask[end], self.logprobs[end]
        self.cursor = end

    def extra_logprobs(self) -> dict[str, list[float]]:
        """Other models' logprobs of the sampled tokens (`extra_logprobs` on a logprob entry), by name."""
        out: dict[str, list[float]] = {}
        for start, entries in self.choices:
            for i, entry in enumerate(entries):
                extra = (entry.model_extra or {}).get("extra_logprobs")
                if isinstance(extra, dict):
                    for key, value in extra.items():
                        column = out.setdefault(key, [math.nan] * len(self.ids))
                        column[start + i] = math.nan if value is None else float(value)
        return out


def _splice_turn(tokenizer: Any, splice: _Splice, item: Any) -> None:
    """Put one swapped turn's tokens where its sentinel is."""
    at = splice.next_sentinel()
    if isinstance(item, dict):
        if item.get("tool_calls"):
            raise ValueError(
                "Assistant message has tool_calls but is being tokenized via tokenizer.encode(content), which "
                "would leave the tool calls out: keep the sampled Choice (with logprobs) instead"
            )
        content = item.get("content")
        if not isinstance(content, str):
            raise ValueError("an assistant message trained without logprobs needs a string 'content'")
        new = list(tokenizer.encode(content, add_special_tokens=False))
        splice.put(at, at + 1, new, [math.nan] * len(new), dedupe_next=False)
        return
    logprobs = item.logprobs
    entries = list(logprobs.content or logprobs.refusal or [])
    start = _think_start(tokenizer, splice.ids, at, splice.cursor, entries)
    splice.choices.append((start, entries))
    splice.put(
        start, at + 1, _sampled_ids(tokenizer, item, entries), [e.logprob for e in entries], dedupe_next=True
    )


def tokenize_trajectory(
    tokenizer: Any,
    image_processor: Any | None,
    history: History,
    advantage: float,
    allow_training_without_logprobs: bool,
    trajectory: Trajectory,
    chat_template_kwargs: dict[str, Any] | None = None,
    chat_template_tool_schema_format: ChatTemplateToolSchemaFormat = "default",
) -> TokenizedResult | None:
    """Tokenise `history` (a trajectory's conversation) up to its last trainable assistant turn, with each
    sampled turn's exact tokens and logprobs (see the module docstring); None when no turn is trainable.

    Example:
        result = tokenize_trajectory(tokenizer, None, art.History(messages_and_choices=items), 1.0, False, t)
    """
    if image_processor is not None:
        raise NotImplementedError(
            "images: ART's trainer is text-only, so this tokenizer takes no image_processor"
        )
    without = allow_training_without_logprobs
    items = list(history.messages_and_choices)
    last = max((i for i, item in enumerate(items) if _counts(item, without)), default=-1)
    if last < 0:
        return None
    items = items[: last + 1]
    final = items[-1]
    messages = _messages(
        tokenizer, items, final_choice_plain=isinstance(final, Choice) and final.logprobs is not None
    )
    tools = _tools(history.tools, chat_template_tool_schema_format)
    kwargs = _template_kwargs(tokenizer, chat_template_kwargs)
    chat = str(
        tokenizer.apply_chat_template(
            messages, tools=tools, continue_final_message=False, tokenize=False, **kwargs
        )
    )
    plain = _token_ids(tokenizer, messages, tools=tools, continue_final_message=False, **kwargs)
    unused = set(range(int(tokenizer.vocab_size))) - set(plain)
    if not unused:
        raise ValueError("every token id of the vocabulary is in the rendering: no sentinel token is left")
    sentinel = max(unused)
    swapped = [_swapped(item, without) for item in items]
    template = [
        {"role": "assistant", "content": tokenizer.decode(sentinel), **_calls_of(message)}
        if swap
        else message
        for message, swap in zip(messages, swapped, strict=True)
    ]
    splice = _Splice(
        _token_ids(tokenizer, template, tools=tools, continue_final_message=True, **kwargs), sentinel
    )
    for item, swap in zip(items, swapped, strict=True):
        if swap:
            _splice_turn(tokenizer, splice, item)
    return TokenizedResult(
        advantage=advantage,
        chat=chat,
        token_ids=splice.ids,
        input_pos=list(range(len(splice.ids))),
        assistant_mask=splice.mask,
        logprobs=splice.logprobs,
        pixel_values=None,
        image_grid_thw=None,
        trajectory=trajectory,
        choice_offsets=[start for start, _ in splice.choices],
        extra_logprobs=splice.extra_logprobs(),
        _tokenizer=tokenizer,
    )


def _calls_of(message: Mapping[str, Any]) -> dict[str, Any]:
    return {"tool_calls": message["tool_calls"]} if message.get("tool_calls") else {}


# ---- supervised fine-tuning -------------------------------------------------------------------------
def _find(values: list[int], pattern: list[int], start: int) -> int | None:
    """The first index >= start where `pattern` occurs in `values` (None: nowhere, or an empty pattern)."""
    if not pattern:
        return None
    for index in range(start, len(values) - len(pattern) + 1):
        if values[index : index + len(pattern)] == pattern:
            return index
    return None


def response_only_labels(
    input_ids: list[int], *, instruction_ids: list[int], response_ids: list[int]
) -> list[int]:
    """Labels that train only what follows each `response_ids` up to the next `instruction_ids` (-100
    elsewhere): Unsloth's `train_on_responses_only`, over token ids."""
    labels = [IGNORE_INDEX] * len(input_ids)
    index = 0
    while (found := _find(input_ids, response_ids, index)) is not None:
        begin = found + len(response_ids)
        after = _find(input_ids, instruction_ids, begin)
        end = len(input_ids) if after is None else after
        labels[begin:end] = input_ids[begin:end]
        index = max(end, begin)
        if index >= len(input_ids):
            break
    return labels


def tokenize_sft_batch(
    trajectory_batch: list[Trajectory],
    learning_rate: float,
    tokenizer: Any,
    instruction_part: str,
    response_part: str,
    chat_template_kwargs: dict[str, Any] | None = None,
    chat_template_tool_schema_format: ChatTemplateToolSchemaFormat = "default",
    max_seq_length: int | None = None,
) -> SFTBatch:
    """Tokenise a batch for SFT: each trajectory rendered whole, trained on its responses only (after
    `response_part`, e.g. "<|im_start|>assistant\\n", up to the next `instruction_part`); one longer than
    `max_seq_length` is dropped, with a warning printed.

    Example:
        batch = tokenize_sft_batch(trajectories, 1e-4, tokenizer, "<|im_start|>user\\n", "<|im_start|>assistant\\n")
    """
    if max_seq_length is not None and max_seq_length < 1:
        raise ValueError(f"max_seq_length must be positive, got {max_seq_length}")
    instruction_ids = list(tokenizer(instruction_part, add_special_tokens=False).input_ids)
    response_ids = list(tokenizer(response_part, add_special_tokens=False).input_ids)
    kwargs = _template_kwargs(tokenizer, chat_template_kwargs)
    tensors: list[dict[str, torch.Tensor]] = []
    num_tokens = num_trainable = dropped = 0
    for trajectory in trajectory_batch:
        messages = _messages(tokenizer, trajectory.messages_and_choices)
        tools = _tools(trajectory.tools, chat_template_tool_schema_format)
        ids = _token_ids(
            tokenizer, messages, tools=tools, tokenize=True, add_generation_prompt=False, **kwargs
        )
        if max_seq_length is not None and len(ids) > max_seq_length:
            dropped += 1
            continue
        labels = response_only_labels(ids, instruction_ids=instruction_ids, response_ids=response_ids)
        tensors.append(
            {
                "input_ids": torch.tensor([ids], dtype=torch.long),
                "attention_mask": torch.ones((1, len(ids)), dtype=torch.long),
                "labels": torch.tensor([labels], dtype=torch.long),
            }
        )
        num_tokens += len(ids)
        num_trainable += sum(1 for label in labels if label != IGNORE_INDEX)
    if dropped:
        print(
            f"WARNING: Dropped {dropped}/{len(trajectory_batch)} SFT trajectories "
            f"because they exceed max_seq_length={max_seq_length}."
        )
    return SFTBatch(
        trajectory_tensors=tensors,
        learning_rate=learning_rate,
        num_trajectories=len(tensors),
        num_tokens=num_tokens,
        num_trainable_tokens=num_trainable,
        num_dropped_trajectories=dropped,
    )
