"""From sampled token ids to text: incremental decoding, stop strings, and per-token strings/bytes.

`TextStream` turns a growing list of token ids into text deltas the way a streaming server must:
- incremental decoding (vLLM's prefix/read offsets): each delta is the text the newest tokens add, held
  back while it ends in an incomplete UTF-8 character, so multi-byte characters are never split;
- stop strings: the text is cut before the first occurrence of any stop string and the stream reports it;
  while streaming, the last (longest stop string - 1) characters are held back until they cannot be the
  start of a stop string.
Streamed and non-streamed replies use the same `TextStream`, so their final text is identical by
construction: the text of a reply is the concatenation of its deltas.

`TokenTable` gives each token id's own string and bytes for `logprobs.content` (byte-level BPE tokens are
mapped back to their raw bytes; SentencePiece pieces have "▁" turned into a space, "<0xNN>" into a byte).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

_BYTE_TOKEN = re.compile(r"<0x([0-9A-Fa-f]{2})>")


def _gpt2_byte_decoder() -> dict[str, int]:
    """The inverse of GPT-2's bytes_to_unicode map used by byte-level BPE tokenizers."""
    printable = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1))
    printable += list(range(ord("®"), ord("ÿ") + 1))
    chars = printable[:]
    n = 0
    for b in range(256):
        if b not in printable:
            printable.append(b)
            chars.append(256 + n)
            n += 1
    return {chr(c): b for b, c in zip(printable, chars, strict=True)}


_BYTE_DECODER = _gpt2_byte_decoder()


class TokenTable:
    """Token id -> (text, raw bytes), computed on first use and cached."""

    def __init__(self, tokenizer: Any) -> None:
        self.tokenizer = tokenizer
        self._cache: dict[int, tuple[str, list[int]]] = {}

    def _bytes(self, token_id: int) -> bytes:
        piece = self.tokenizer.convert_ids_to_tokens(token_id)
        if piece is None:
            return b""
        if token_id in self.tokenizer.all_special_ids:
            return str(piece).encode()
        if all(c in _BYTE_DECODER for c in piece):
            return bytes(_BYTE_DECODER[c] for c in piece)
        match = _BYTE_TOKEN.fullmatch(piece)
        if match:
            return bytes([int(match.group(1), 16)])
        return str(piece).replace("▁", " ").encode()

    def get(self, token_id: int) -> tuple[str, list[int]]:
        """(token text, its UTF-8 bytes as ints) as OpenAI's logprobs report them."""
        entry = self._cache.get(token_id)
        if entry is None:
            raw = self._bytes(token_id)
            entry = (raw.decode("utf-8", errors="replace"), list(raw))
            self._cache[token_id] = entry
        return entry


class TextStream:
    """Text deltas of a growing token sequence, cut at stop strings (see the module docstring)."""

    def __init__(
        self, tokenizer: Any, stop: Sequence[str] = (), *, skip_token_ids: Sequence[int] = ()
    ) -> None:
        self.tokenizer = tokenizer
        self.stop = [s for s in stop if s]
        self._hold = max((len(s) for s in self.stop), default=1) - 1
        self._skip = set(skip_token_ids)
        self._ids: list[int] = []
        self._prefix_offset = 0
        self._read_offset = 0
        self._text = ""  # decoded so far (not yet cut)
        self._emitted = 0  # characters of _text already returned
        self.stopped = False  # a stop string was found; the text ends before it

    def _decode(self, ids: list[int]) -> str:
        text = self.tokenizer.decode(ids, skip_special_tokens=True)
        assert isinstance(text, str)
        return text

    def _decode_new(self) -> None:
        prefix = self._decode(self._ids[self._prefix_offset : self._read_offset])
        full = self._decode(self._ids[self._prefix_offset :])
        if len(full) > len(prefix) and not full.endswith("\ufffd"):
            self._text += full[len(prefix) :]
            self._prefix_offset = self._read_offset
            self._read_offset = len(self._ids)

    def _cut_at_stop(self, search_from: int) -> None:
        start = max(0, search_from - self._hold)
        cut = min((i for i in (self._text.find(s, start) for s in self.stop) if i >= 0), default=-1)
        if cut >= 0:
            self._text = self._text[:cut]
            self.stopped = True

    def push(self, token_ids: Sequence[int]) -> str:
        """Add sampled tokens; returns the text that may be shown now ("" if held back or stopped)."""
        if self.stopped:
            return ""
        before = len(self._text)
        self._ids.extend(t for t in token_ids if t not in self._skip)
        self._decode_new()
        if self.stop:
            self._cut_at_stop(before)
        safe = len(self._text) if self.stopped else max(self._emitted, len(self._text) - self._hold)
        delta = self._text[self._emitted : safe]
        self._emitted = safe
        return delta

    def finish(self) -> str:
        """The rest of the text once generation is over (held-back characters, an incomplete tail)."""
        if not self.stopped:
            before = len(self._text)
            tail = self._decode(self._ids[self._prefix_offset :])
            prefix = self._decode(self._ids[self._prefix_offset : self._read_offset])
            self._text += tail[len(prefix) :]
            if self.stop:
                self._cut_at_stop(before)
        delta = self._text[self._emitted :]
        self._emitted = len(self._text)
        return delta

    @property
    def text(self) -> str:
        """All text so far (including held-back characters)."""
        return self._text
