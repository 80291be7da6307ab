"""Making a group fit the judge's context: the longest message texts are cut in the middle, with a note.

A RULER prompt shows a whole group at once, so a group with long tool results (a page of search hits, a
file) can be longer than a small judge's context window. Rather than fail the group, RULER cuts it:

- `cut_contents(lists, excess)` shortens the string contents of messages until `excess` characters are
  gone: tool results first (they are evidence the judge needs least verbatim), then any message. It
  levels the longest texts down to one length (the shortest ones stay whole), keeps the beginning and
  the end of each cut text, and says in the text how much was cut.
- `budget_after_overflow(...)` reads how far over the context a refused prompt was ("maximum context
  length is 8192 tokens ... 9010 tokens", as our server, vLLM and OpenAI word it) and returns the prompt
  length, in characters, to aim at next; without numbers in the error it aims 40% shorter.

`Judge(max_prompt_chars=...)` fits every prompt up front; without it RULER fits a prompt only after the
judge refused it for its length, and then starts that judge's later prompts from the budget that fit
(see `ruler.py`).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

CUT_NOTE = "\n[... {n} characters cut to fit the judge's context ...]\n"
MIN_KEPT_CHARS = 200
"""A cut text keeps at least this many characters (its beginning and end)."""
SAFETY = 0.9
"""The share of the estimated room a refit aims at: characters per token vary along a prompt."""

_LIMIT = re.compile(r"maximum context length is (\d+)", re.IGNORECASE)
_PROMPT_TOKENS = (
    re.compile(r"(\d+) (?:tokens )?in the messages", re.IGNORECASE),  # vLLM: "(7448 in the messages, ..."
    re.compile(r"resulted in (\d+) tokens", re.IGNORECASE),  # OpenAI, our server
    re.compile(r"requested (\d+) tokens", re.IGNORECASE),
)


def prompt_chars(prompt: Sequence[dict[str, Any]]) -> int:
    """The characters of a prompt's message texts."""
    return sum(len(m["content"]) for m in prompt if isinstance(m.get("content"), str))


def cut_text(text: str, keep: int) -> str:
    """`text` shortened to its first and last `keep // 2` characters around a note of what was cut."""
    if len(text) <= keep:
        return text
    head = keep - keep // 2
    tail = keep // 2
    return text[:head] + CUT_NOTE.format(n=len(text) - keep) + (text[-tail:] if tail else "")


def _level(lengths: Sequence[int], excess: int, floor: int) -> int | None:
    """The largest length L >= floor such that cutting every text longer than L to L removes at least
    `excess` characters (plus each cut's note); None when even `floor` does not remove enough."""
    note = len(CUT_NOTE.format(n=10**6))

    def removed(limit: int) -> int:
        return sum(n - limit - note for n in lengths if n - limit > note)

    if removed(floor) < excess:
        return None
    low, high = floor, max(lengths)
    while low < high:  # the largest limit that still removes enough
        mid = (low + high + 1) // 2
        if removed(mid) >= excess:
            low = mid
        else:
            high = mid - 1
    return low


def cut_contents(
    lists: Sequence[Sequence[dict[str, Any]]], excess: int, *, min_kept: int = MIN_KEPT_CHARS
) -> tuple[list[list[dict[str, Any]]], int]:
    """Copies of `lists` (message lists) with about `excess` characters cut from their longest string
    contents, tool results first; and how many characters were cut (less than `excess` when the texts
    cannot lose that much without going under `min_kept` characters each). The input is not changed.

    Example:
        >>> lists = [[{"role": "tool", "content": "x" * 5000}], [{"role": "user", "content": "hi"}]]
        >>> cut, removed = cut_contents(lists, 3000)
        >>> len(cut[0][0]["content"]) < 2100 and cut[1][0]["content"] == "hi" and removed >= 3000
        True
    """
    out = [[dict(m) for m in messages] for messages in lists]
    removed = 0
    for only_tools in (True, False):
        if removed >= excess:
            break
        spots = [
            (i, j)
            for i, messages in enumerate(out)
            for j, m in enumerate(messages)
            if isinstance(m.get("content"), str) and (m.get("role") == "tool" or not only_tools)
        ]
        lengths = [len(out[i][j]["content"]) for i, j in spots]
        if not lengths:
            continue
        limit = _level(lengths, excess - removed, min_kept)
        keep = min_kept if limit is None else limit
        for i, j in spots:
            before = len(out[i][j]["content"])
            if before - keep > len(CUT_NOTE.format(n=before - keep)):
                out[i][j]["content"] = cut_text(out[i][j]["content"], keep)
                removed += before - len(out[i][j]["content"])
    return out, removed


def budget_after_overflow(prompt_len: int, error: str, reserve_tokens: int = 0) -> int:
    """The prompt length in characters to aim at after a judge refused `prompt_len` characters as too
    long with the message `error`; `reserve_tokens` is the room its answer needs (its max_tokens).

    Example:
        >>> budget_after_overflow(30_000, "maximum context length is 8192 tokens. However, your messages "
        ...                       "resulted in 10000 tokens", reserve_tokens=768)
        20044
    """
    limit_match = _LIMIT.search(error)
    used = next((int(m.group(1)) for p in _PROMPT_TOKENS if (m := p.search(error))), None)
    if limit_match and used:
        room = int(limit_match.group(1)) - reserve_tokens
        if room > 0:
            return int(prompt_len * min(room / used, 1.0) * SAFETY)
    return int(prompt_len * 0.6)
