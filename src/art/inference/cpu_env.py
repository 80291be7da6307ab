"""Settings for torch's CPU libraries that must be in place before they first run.

oneDNN (which runs torch's bf16 matmuls on CPU) caches a compiled "primitive" per matmul shape, 1,024 by
default. Training and generation meet new shapes every step (micro-batch token counts, batch sizes, prompt
lengths), so the cache kept filling: measured +20 MiB of RSS per demo step over 15 steps, flat with a
small cache, and no slower decode steps with 16 entries (benchmarks/README.md, "Memory"). 64 entries
keep every shape of a decode step, a prefill and a training micro-batch at once. A value the user sets
in the environment wins.
"""

from __future__ import annotations

import os

ONEDNN_PRIMITIVE_CACHE = 64


def configure() -> None:
    """Apply the defaults (idempotent; oneDNN reads them when it creates its first primitive)."""
    os.environ.setdefault("ONEDNN_PRIMITIVE_CACHE_CAPACITY", str(ONEDNN_PRIMITIVE_CACHE))
