"""Trajectories -> token sequences for training: ids, assistant mask and sampled logprobs, aligned.

Owns the one question training must get exactly right: which tokens did the model sample, and what did it
see before each of them. The engine samples turn k from ``ChatTemplate.render_ids(messages[:i_k], tools,
add_generation_prompt=True)`` (call it ``P_k``) and returns the exact sampled ids ``S_k`` on the Choice. So a
training sequence is built from the same renderer, with the sampled ids spliced in where the template would
put the turn's re-rendered text:

    P_0 + S_0 + close_0 + D_0 + S_1 + close_1 + D_1 + ... + S_last

where ``D_k`` is what the conversation adds after turn k (tool results, user turns, the next generation
prompt) and ``close_k`` is whatever of the template's end-of-turn text (ChatML: ``<|im_end|>\\n``) the model
did not sample itself. That is only valid when the template renders earlier turns the same way once the
conversation goes on (``render(messages[:i]) `` is a prefix of the later renders). Where it does not (some
templates strip reasoning from past turns), each trainable turn becomes its own sequence ``P_k + S_k``,
which is exactly what the engine saw, at the price of re-processing the shared prefix; a warning names the
model once.

The mask is 1 only on sampled tokens of trainable turns (a Choice with logprobs), including the
end-of-turn token when it was sampled. Dict assistant turns are context, unless the step allows training
without logprobs (the reference's `allow_training_without_logprobs`): then they are trained on their rendered
tokens, with unknown sampled logprobs (ratio 1). History after the last trainable turn is dropped (nothing
there is trained, and nothing before depends on it).

Choices without ``token_ids`` (from another provider, or hand-made): their sampled ids are taken from
``logprobs.content[i].token`` when every token reads ``token_id:<int>`` (vLLM's
``return_tokens_as_token_ids``); otherwise the turn is re-tokenised from the rendered text, with a
warning. Re-tokenised ids are trainable only if they line up one to one with ``logprobs.content`` (same
count, each token's text equal to the decoded id; one extra trailing entry may be the end-of-turn token),
because a logprob paired with the wrong token makes the importance ratio meaningless. A turn that does not
line up stays in the sequence as context (mask 0) and is counted in ``TokenizeStats.unaligned_turns``.

Supervised fine-tuning (``tokenize_sft_trajectory``) has nothing sampled to splice: every assistant turn,
dict or Choice, is trained on the tokens the template renders for it, through its end-of-turn token, and
the same assembly (one sequence, or one per turn when the template rewrites earlier turns) applies.
"""

from __future__ import annotations

import itertools
import logging
import math
import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from openai.types.chat.chat_completion import Choice

from art.chat.chat_template import ChatTemplate
from art.trajectories import (
    History,
    Message,
    MessageOrChoice,
    Tools,
    Trajectory,
    choice_to_message,
    is_trainable_choice,
    is_trainable_turn,
)

logger = logging.getLogger(__name__)

_warned: set[str] = set()


def warn_once(key: str, message: str) -> None:
    """Warn (warnings + logging) the first time `key` is seen in this process."""
    if key in _warned:
        return
    _warned.add(key)
    logger.warning(message)
    warnings.warn(message, stacklevel=3)


@dataclass(frozen=True)
class TurnSpan:
    """Where a sampled turn sits in a sequence: `token_ids[start + j]` is its j-th sampled token (the
    Choice's `logprobs.content[j]`), for j < `length`. `history` 0 is the main conversation, k the k-th
    additional history; `item` the Choice's index in that history's `messages_and_choices`."""

    history: int
    item: int
    start: int
    length: int


@dataclass(frozen=True)
class TokenizedSequence:
    """One training sequence: `token_ids[i]` is predicted from `token_ids[:i]`.

    `assistant_mask[i]` is True where token i was sampled by the model in a trainable turn;
    `sampled_logprobs[i]` is the engine's logprob of that token (NaN where the mask is False).
    `checkpoint_steps` are the steps whose adapters sampled its turns (for data staleness).
    """

    token_ids: list[int]
    assistant_mask: list[bool]
    sampled_logprobs: list[float]
    advantage: float = 0.0
    group_index: int = -1
    trajectory_index: int = -1
    checkpoint_steps: tuple[int, ...] = ()
    turn_spans: tuple[TurnSpan, ...] = ()  # the sampled turns in it, for the trainer's record

    def __len__(self) -> int:
        return len(self.token_ids)

    @property
    def num_assistant_tokens(self) -> int:
        """How many tokens of this sequence are trained on."""
        return sum(self.assistant_mask)


@dataclass
class TokenizeStats:
    """What tokenisation noticed, summed over trajectories (reported as step metrics)."""

    trainable_turns: int = 0
    retokenized_turns: int = 0  # Choices without token_ids whose text was re-tokenised and lined up
    unaligned_turns: int = 0  # Choices whose logprobs did not line up with tokens: kept as context
    split_histories: int = 0  # conversations trained turn by turn because the template rewrites turns

    def add(self, other: TokenizeStats) -> None:
        """Accumulate `other` into this one."""
        self.trainable_turns += other.trainable_turns
        self.retokenized_turns += other.retokenized_turns
        self.unaligned_turns += other.unaligned_turns
        self.split_histories += other.split_histories


def sampled_token_ids(choice: Choice) -> list[int] | None:
    """The exact sampled token ids the engine attached to `choice` (None when it has none)."""
    extra = choice.model_extra or {}
    ids = extra.get("token_ids", getattr(choice, "token_ids", None))
    if ids is None:
        return None
    return [int(i) for i in ids]


def choice_checkpoint_step(choice: Choice) -> int | None:
    """The step whose adapter sampled `choice` (set by the engine), or None."""
    value = (choice.model_extra or {}).get("checkpoint_step")
    return None if value is None else int(value)


def _starts_with(seq: Sequence[int], prefix: Sequence[int]) -> bool:
    return len(seq) >= len(prefix) and list(seq[: len(prefix)]) == list(prefix)


def _common_prefix_length(a: Sequence[int], b: Sequence[int]) -> int:
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    return n


def _ends_with(seq: Sequence[int], suffix: Sequence[int]) -> bool:
    return len(seq) >= len(suffix) and (not suffix or list(seq[-len(suffix) :]) == list(suffix))


@dataclass
class _Turn:
    """One trainable turn as spliced: its ids, which of them are trained, and their sampled logprobs."""

    prompt_ids: list[int]  # P_k
    full_ids: list[int]  # F_k: the conversation up to and including this turn, re-rendered from text
    ids: list[int]
    mask: list[bool]
    logprobs: list[float]
    checkpoint_step: int | None
    spliceable: bool  # P_k is a prefix of F_k and the rendered turn ends with the closing tokens
    item: int = -1  # index of the turn in its history's messages_and_choices


@dataclass
class _Pieces:
    ids: list[int] = field(default_factory=list)
    mask: list[bool] = field(default_factory=list)
    logprobs: list[float] = field(default_factory=list)
    spans: list[TurnSpan] = field(default_factory=list)

    def context(self, ids: Sequence[int]) -> None:
        self.ids.extend(ids)
        self.mask.extend([False] * len(ids))
        self.logprobs.extend([math.nan] * len(ids))

    def turn(self, turn: _Turn) -> None:
        self.spans.append(TurnSpan(0, turn.item, len(self.ids), len(turn.ids)))
        self.ids.extend(turn.ids)
        self.mask.extend(turn.mask)
        self.logprobs.extend(turn.logprobs)


class TrajectoryTokenizer:
    """Tokenises trajectories for one model; checks its chat template once (see module docstring)."""

    def __init__(self, chat_template: ChatTemplate, model_name: str | None = None) -> None:
        self.chat_template = chat_template
        self.tokenizer: Any = chat_template.tokenizer
        self.model_name = model_name or str(getattr(self.tokenizer, "name_or_path", "") or "this model")
        self.closing_ids = self._closing_ids()
        self.template_ok = self.check_template()

    # -- template facts ---------------------------------------------------------------------------------

    def _closing_ids(self) -> list[int]:
        """Tokens the template writes after an assistant turn's content (ChatML: `<|im_end|>`, `\\n`)."""
        probe = "ARTPROBE"
        user: list[Message] = [{"role": "user", "content": "hi"}]
        prompt = self.chat_template.render_text(user, add_generation_prompt=True)
        full = self.chat_template.render_text([*user, {"role": "assistant", "content": probe}])
        if not full.startswith(prompt + probe):
            return []
        return list(self.tokenizer.encode(full[len(prompt) + len(probe) :], add_special_tokens=False))

    def check_template(self) -> bool:
        """Whether one conversation renders as a prefix of its continuation at every assistant turn.

        Probes a conversation with reasoning, a tool call and a tool result. Warns once per model when the
        template rewrites earlier turns; training then falls back to one sequence per trainable turn.
        """
        tools: Tools = [
            {
                "type": "function",
                "function": {
                    "name": "add",
                    "description": "Add two numbers.",
                    "parameters": {"type": "object", "properties": {"a": {"type": "number"}}},
                },
            }
        ]
        call = {"id": "call_1", "type": "function", "function": {"name": "add", "arguments": '{"a": 2}'}}
        messages: list[Message] = [
            {"role": "system", "content": "You add numbers."},
            {"role": "user", "content": "What is 2 + 2?"},
            {"role": "assistant", "content": "<think>\nI should call add.\n</think>\n", "tool_calls": [call]},
            {"role": "tool", "tool_call_id": "call_1", "content": "4"},
            {"role": "assistant", "content": "<think>\nThe tool said 4.\n</think>\n\nIt is 4."},
            {"role": "user", "content": "Thanks."},
            {"role": "assistant", "content": "You are welcome."},
        ]
        ok = True
        try:
            previous_full: list[int] | None = None
            for i, message in enumerate(messages):
                if message["role"] != "assistant":
                    continue
                prompt = self.chat_template.render_ids(messages[:i], tools, add_generation_prompt=True)
                full = self.chat_template.render_ids(messages[: i + 1], tools)
                ok &= _starts_with(full, prompt) and _ends_with(full, self.closing_ids)
                ok &= previous_full is None or _starts_with(prompt, previous_full)
                previous_full = full
        except Exception as exc:  # a template that cannot render the probe at all
            logger.info("chat template probe of %s failed: %s", self.model_name, exc)
            ok = False
        if not ok:
            self._warn_rewrites()
        return ok

    def _warn_rewrites(self) -> None:
        warn_once(
            f"template-rewrites:{self.model_name}",
            f"The chat template of {self.model_name} renders earlier turns differently once a conversation "
            "continues (for example it strips reasoning from past assistant turns), so the prompt a turn was "
            "sampled from is not a prefix of the later conversation. ART trains each assistant turn of such "
            "conversations as its own sequence: correct, but the shared prefix is processed once per turn. "
            "To train a whole conversation as one sequence, give the tokenizer a chat_template that renders "
            "past turns unchanged.",
        )

    # -- one conversation -------------------------------------------------------------------------------

    def tokenize_trajectory(
        self,
        trajectory: Trajectory,
        *,
        advantage: float = 0.0,
        group_index: int = -1,
        trajectory_index: int = -1,
        without_logprobs: bool = False,
    ) -> tuple[list[TokenizedSequence], TokenizeStats]:
        """Sequences of a trajectory: its main conversation and each additional history, same advantage.
        `without_logprobs`: see `tokenize_history`."""
        stats = TokenizeStats()
        sequences: list[TokenizedSequence] = []
        histories = [History(messages_and_choices=trajectory.messages_and_choices, tools=trajectory.tools)]
        histories += trajectory.additional_histories
        for h, history in enumerate(histories):
            for seq in self.tokenize_history(
                history.messages_and_choices, history.tools, stats, without_logprobs=without_logprobs
            ):
                sequences.append(
                    replace(
                        seq,
                        advantage=advantage,
                        group_index=group_index,
                        trajectory_index=trajectory_index,
                        turn_spans=tuple(replace(span, history=h) for span in seq.turn_spans),
                    )
                )
        return sequences, stats

    def tokenize_history(
        self,
        items: Sequence[MessageOrChoice],
        tools: Tools | None,
        stats: TokenizeStats | None = None,
        *,
        without_logprobs: bool = False,
    ) -> list[TokenizedSequence]:
        """The sequences of one conversation (advantage and indices left at their defaults).

        Usually one sequence; one per trainable turn when the template rewrites earlier turns. Sequences
        without any trained token are left out. `without_logprobs` (the reference's
        `allow_training_without_logprobs`): assistant turns without sampled logprobs are trained too, on
        the tokens the template renders for them, with unknown (NaN) sampled logprobs, which the trainer
        takes as the current policy's (importance ratio 1).
        """
        stats = stats if stats is not None else TokenizeStats()
        trainable = [
            i for i, item in enumerate(items) if is_trainable_turn(item, without_logprobs=without_logprobs)
        ]
        if not trainable:
            return []
        items = list(items[: trainable[-1] + 1])  # history after the last trainable turn teaches nothing
        messages = [choice_to_message(m) if isinstance(m, Choice) else dict(m) for m in items]
        turns: list[_Turn] = []
        for i in trainable:
            item = items[i]
            prompt = self.chat_template.render_ids(messages[:i], tools, add_generation_prompt=True)
            full = self.chat_template.render_ids(messages[: i + 1], tools)
            if is_trainable_choice(item):
                assert isinstance(item, Choice)
                turns.append(replace(self._turn(item, prompt, full, stats), item=i))
            else:  # no sampled logprobs: the rendered turn, as SFT trains it
                turns.append(replace(self._sft_turn(prompt, full), item=i))
                stats.trainable_turns += 1
        return self._assemble(turns, stats)

    def _assemble(self, turns: Sequence[_Turn], stats: TokenizeStats) -> list[TokenizedSequence]:
        """One sequence of all `turns` when each rendered prefix continues the previous one, else one
        sequence per turn (its own prompt + the turn); sequences without a trained token are left out."""
        spliceable = all(t.spliceable for t in turns) and all(
            _starts_with(later.prompt_ids, earlier.full_ids) for earlier, later in itertools.pairwise(turns)
        )
        if not spliceable:
            stats.split_histories += 1
            self._warn_rewrites()
            out = []
            for turn in turns:
                pieces = _Pieces()
                pieces.context(turn.prompt_ids)
                pieces.turn(turn)
                out.append(self._finish(pieces, [turn]))
            return [seq for seq in out if seq.num_assistant_tokens]

        pieces = _Pieces()
        pieces.context(turns[0].prompt_ids)
        for k, turn in enumerate(turns):
            pieces.turn(turn)
            if k + 1 < len(turns):
                pieces.context(self._closing_remainder(turn.ids))
                pieces.context(turns[k + 1].prompt_ids[len(turn.full_ids) :])
        seq = self._finish(pieces, turns)
        return [seq] if seq.num_assistant_tokens else []

    # -- supervised fine-tuning ---------------------------------------------------------------------

    def tokenize_sft_trajectory(
        self, trajectory: Trajectory, stats: TokenizeStats | None = None, *, last_turn_only: bool = False
    ) -> list[TokenizedSequence]:
        """SFT sequences of a trajectory: its main conversation and each additional history (with
        `last_turn_only`, each one's final assistant turn only)."""
        stats = stats if stats is not None else TokenizeStats()
        histories = [(trajectory.messages_and_choices, trajectory.tools)]
        histories += [(h.messages_and_choices, h.tools) for h in trajectory.additional_histories]
        sequences: list[TokenizedSequence] = []
        for items, tools in histories:
            sequences += self.tokenize_sft_history(items, tools, stats, last_turn_only=last_turn_only)
        return sequences

    def tokenize_sft_history(
        self,
        items: Sequence[MessageOrChoice],
        tools: Tools | None,
        stats: TokenizeStats | None = None,
        *,
        last_turn_only: bool = False,
    ) -> list[TokenizedSequence]:
        """A conversation for supervised fine-tuning: every assistant turn (only the final one with
        `last_turn_only`) is trained (dict or Choice, tool calls included) on the tokens the template
        renders for it, up to and including its end-of-turn token (ChatML `<|im_end|>`, what the model
        samples to stop; not the newline after it). Everything else is context. One sequence, or one per
        assistant turn when the template rewrites earlier turns.
        """
        stats = stats if stats is not None else TokenizeStats()
        messages = [choice_to_message(m) if isinstance(m, Choice) else dict(m) for m in items]
        assistant = [i for i, m in enumerate(messages) if m.get("role") == "assistant"]
        if not assistant:
            return []
        messages = messages[: assistant[-1] + 1]
        turns: list[_Turn] = []
        for i in assistant[-1:] if last_turn_only else assistant:
            prompt = self.chat_template.render_ids(messages[:i], tools, add_generation_prompt=True)
            full = self.chat_template.render_ids(messages[: i + 1], tools)
            turns.append(self._sft_turn(prompt, full))
            stats.trainable_turns += 1
        return self._assemble(turns, stats)

    def _sft_turn(self, prompt: list[int], full: list[int]) -> _Turn:
        """The rendered turn `full[len(prompt):]`, trained up to its end-of-turn token.

        Where the template does not render `prompt` as a prefix of `full`, the turn is what follows their
        common prefix, and its sequence is `full` itself (what the model will see once the turn is written).
        """
        common = len(prompt) if _starts_with(full, prompt) else _common_prefix_length(prompt, full)
        ids = full[common:]
        closes = bool(self.closing_ids) and _ends_with(ids, self.closing_ids)
        n_trained = len(ids) - (len(self.closing_ids) - 1 if closes else 0)
        mask = [True] * n_trained + [False] * (len(ids) - n_trained)
        spliceable = common == len(prompt) and closes
        return _Turn(full[:common], full, ids, mask, [math.nan] * len(ids), None, spliceable)

    @staticmethod
    def _finish(pieces: _Pieces, turns: Sequence[_Turn]) -> TokenizedSequence:
        if pieces.mask:
            # The first token has no prefix to be predicted from.
            pieces.mask[0] = False
            pieces.logprobs[0] = math.nan
        steps = tuple(t.checkpoint_step for t in turns if t.checkpoint_step is not None and any(t.mask))
        return TokenizedSequence(
            pieces.ids, pieces.mask, pieces.logprobs, checkpoint_steps=steps, turn_spans=tuple(pieces.spans)
        )

    def _closing_remainder(self, turn_ids: Sequence[int]) -> list[int]:
        """The part of the template's end-of-turn tokens that the sampled ids do not already end with."""
        closing = self.closing_ids
        for x in range(min(len(closing), len(turn_ids)), 0, -1):
            if list(turn_ids[-x:]) == closing[:x]:
                return closing[x:]
        return list(closing)

    def _turn(self, choice: Choice, prompt: list[int], full: list[int], stats: TokenizeStats) -> _Turn:
        """Splice one trainable Choice: its sampled ids, mask and logprobs (see module docstring)."""
        assert choice.logprobs is not None and choice.logprobs.content
        entries = choice.logprobs.content
        logprobs = [float(e.logprob) for e in entries]
        step = choice_checkpoint_step(choice)
        closing = self.closing_ids
        spliceable = _starts_with(full, prompt) and _ends_with(full, closing)
        rendered = full[len(prompt) :] if _starts_with(full, prompt) else []

        def trained(ids: list[int], n_trained: int) -> _Turn:
            stats.trainable_turns += 1
            mask = [True] * n_trained + [False] * (len(ids) - n_trained)
            lps = logprobs[:n_trained] + [math.nan] * (len(ids) - n_trained)
            return _Turn(prompt, full, ids, mask, lps, step, spliceable)

        def context(ids: list[int], why: str) -> _Turn:
            stats.unaligned_turns += 1
            warn_once(
                f"unaligned:{why}",
                f"A Choice's logprobs do not line up with its tokens ({why}); the turn is kept as context "
                "and not trained. Return choices from the ART engine (they carry `token_ids`), or "
                "logprobs with one entry per sampled token.",
            )
            return _Turn(prompt, full, ids, [False] * len(ids), [math.nan] * len(ids), step, spliceable)

        ids = sampled_token_ids(choice)
        if ids is None and all(e.token.startswith("token_id:") for e in entries):
            try:
                ids = [int(e.token.removeprefix("token_id:")) for e in entries]
            except ValueError:
                ids = None
        if ids is not None:
            if len(ids) == len(logprobs):
                return trained(ids, len(ids))
            if len(ids) == len(logprobs) + 1:
                # The engine sampled a final stop token but reported no logprob for it: keep it as context.
                warn_once(
                    "missing-stop-logprob",
                    "Choices carry one more token id than logprobs; the last (stop) token is kept as "
                    "context and not trained.",
                )
                return trained(ids, len(logprobs))
            return context(ids, f"{len(ids)} token ids but {len(logprobs)} logprobs")

        # No sampled ids: re-tokenise the rendered turn and check it against the logprob tokens.
        content = rendered[: len(rendered) - len(closing)] if spliceable else rendered
        candidates = [content]
        if closing:
            candidates.append([*content, closing[0]])  # the end-of-turn token may carry a logprob too
        for candidate in candidates:
            if len(candidate) == len(entries) and all(
                self.tokenizer.decode([t]) == e.token for t, e in zip(candidate, entries, strict=True)
            ):
                stats.retokenized_turns += 1
                warn_once(
                    "retokenized",
                    "A Choice has no `token_ids`; its text was re-tokenised and lined up with its logprobs. "
                    "Tokens the model sampled may tokenise differently from their text; choices from the "
                    "ART engine carry their exact ids.",
                )
                return trained(list(candidate), len(candidate))
        return context(rendered, "re-tokenised text does not match logprob tokens")
