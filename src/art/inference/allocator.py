"""This process's C allocator (glibc malloc) and the big temporary tensors of serving and training.

- Training: a step's activations take gigabytes in tensors whose shapes change every step; without help,
  the allocator's high-water mark only grows. `release_freed_memory` (`malloc_trim`) after each step gives
  everything free back to the OS.
- Serving: glibc returns multi-MiB blocks to the OS when they are freed, and the kernel zero-fills their
  pages again on the next first touch, so a decode step that allocates fresh [batch, vocab] tensors pays
  page faults every time (measured: sampling 2.2-3.4x slower). Raising glibc's thresholds with `mallopt`
  is not a fix: in a thread (the engine worker is one) the block lands in a 64 MiB thread-arena heap that
  glibc creates and unmaps as it fills and empties, which measured five times MORE faults. So the hot
  paths reuse their own buffers instead (`sampling.Workspace`), whatever the allocator does.

A no-op where the C library is not glibc.
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import sys


@functools.cache
def _glibc() -> ctypes.CDLL | None:
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL("libc.so.6")
        libc.malloc_trim  # noqa: B018  (glibc has it; musl does not)
    except (OSError, AttributeError):
        return None
    return libc


def release_freed_memory() -> None:
    """Give memory freed by a training step back to the OS (glibc keeps it in its arenas otherwise)."""
    libc = _glibc()
    if libc is not None:
        with contextlib.suppress(OSError):
            libc.malloc_trim(0)
