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

Both libraries read their cache size from the environment only (no API sets it), once, when they create their
first primitive. So the size is a runtime option, `RuntimeOptions.cpu_primitive_cache` (64 by default;
None leaves both libraries, and the environment, alone), applied when a `TorchEngine` or a `Trainer` is
made: importing ART writes nothing, and this is the one place ART's library code sets a variable that
outlives a call (`tests/common/test_env_table.py`).
"""

from __future__ import annotations

import os

CACHE_VARIABLES = ("ONEDNN_PRIMITIVE_CACHE_CAPACITY", "LRU_CACHE_CAPACITY")  # oneDNN's, ideep's


def bound_primitive_caches(capacity: int | None) -> None:
    """Bound oneDNN's and ideep's caches to `capacity` entries each, unless the user set them (idempotent;
    effective when called before torch's first oneDNN matmul in this process). None: do nothing."""
    if capacity is None:
        return
    for name in CACHE_VARIABLES:
        os.environ.setdefault(name, str(capacity))
