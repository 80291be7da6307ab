"""Settings for torch's CPU libraries that must be in place before they first run.

oneDNN (which runs torch's bf16 matmuls on CPU) caches a compiled "primitive" per matmul shape, and so does
ideep, torch's C++ layer over it, in a cache of its own: 1,024 shapes each by default. Training and
generation meet new shapes every step (micro-batch token counts, batch sizes, prompt lengths), so both
kept filling. oneDNN's cache grew RSS ~20 MiB per demo step; ideep's entries are bigger (each keeps its
primitive's scratch buffers, ~2 MiB for a 400 x 576 x 1536 matmul, more for a training micro-batch):
measured with `memray` as the one allocation that still grew per step (+6-10 MiB of RSS per step, and up to
~2 GiB once full), and a loop over 400 new shapes grew RSS 759 MiB at the default, 140 MiB with 64
entries, and ran no slower (benchmarks/README.md, "Memory"). 64 entries each keep every shape of a decode
step, a prefill and a training micro-batch at once. A value the user sets in the environment wins.
"""

from __future__ import annotations

import os

ONEDNN_PRIMITIVE_CACHE = 64
IDEEP_LRU_CACHE = 64


def configure() -> None:
    """Apply the defaults (idempotent; oneDNN and ideep read them when they create their first primitive)."""
    os.environ.setdefault("ONEDNN_PRIMITIVE_CACHE_CAPACITY", str(ONEDNN_PRIMITIVE_CACHE))
    os.environ.setdefault("LRU_CACHE_CAPACITY", str(IDEEP_LRU_CACHE))
