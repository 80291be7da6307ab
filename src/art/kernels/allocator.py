"""This process's C allocator (glibc malloc) and the big temporary tensors of serving and training.

- Training: a step's activations take gigabytes in tensors whose shapes change every step, all freed when it
  ends. `release_freed_memory` (`malloc_trim`) gives them back to the OS, but then the kernel zero-fills
  every page again on the next step's first touch: SmolLM2, 16 x 255 tokens, 655k page faults and ~4 s of
  kernel CPU per step with a trim after each, 80-100k and ~0.5 s without (forward + backward 14 s -> 11.3 s,
  RSS between steps 0.97 GiB -> 3.3 GiB, flat; benchmarks/README.md, "Training"). So after a step the service
  calls `release_if_short`: it trims only when what the allocator holds free is a large share of the memory
  the machine (or the container's limit) has left; kept memory is reused by the next step and rollouts. The
  cost: RSS between steps stays at the largest step's working set, and the demo's whole-process peak rose
  from 4.4 to 6.2 GiB (one run each; a training-only loop's peak did not change; benchmarks/README.md,
  "Memory"). The service passes its `RuntimeOptions.release_memory` ("always" / "never" override the
  choice; the environment variable ART_RELEASE_MEMORY sets that option).
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
from pathlib import Path

RELEASE_SETTINGS = ("auto", "always", "never")
"""What `release_if_short` may be told: "auto" (the default: release when short), "always" or "never"."""
RELEASE_SHARE = 0.25
"""`release_if_short` trims when the allocator holds more free memory than this share of what would be
available with it released (24 GiB machine, SmolLM2 step: ~2.3 GiB held of ~20 GiB: kept)."""


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
    """Give all freed memory back to the OS (glibc keeps it in its arenas otherwise)."""
    libc = _glibc()
    if libc is not None:
        with contextlib.suppress(OSError):
            libc.malloc_trim(0)


class _MallInfo2(ctypes.Structure):
    _fields_ = [
        (name, ctypes.c_size_t)
        for name in (
            "arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks", "fordblks", "keepcost"
        )
    ]  # fmt: skip


def held_free_bytes() -> int | None:
    """Bytes the C allocator holds free in its arenas (glibc >= 2.33 `mallinfo2`), None where unknown."""
    libc = _glibc()
    fn = getattr(libc, "mallinfo2", None) if libc is not None else None
    if fn is None:
        return None
    fn.restype = _MallInfo2
    return int(fn().fordblks)


def available_bytes() -> int | None:
    """Memory this process could still take: the kernel's MemAvailable, lowered to what the cgroup (v2) limit
    leaves when one is set; None where neither is readable."""
    available: int | None = None
    with contextlib.suppress(OSError, ValueError):
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                available = int(line.split()[1]) * 1024
    with contextlib.suppress(OSError, ValueError):
        cgroup = Path("/sys/fs/cgroup")
        limit = (cgroup / "memory.max").read_text().strip()
        if limit != "max":
            left = int(limit) - int((cgroup / "memory.current").read_text())
            available = left if available is None else min(available, left)
    return available


def release_if_short(setting: str = "auto") -> bool:
    """After a training step: `release_freed_memory` when the memory held free is more than `RELEASE_SHARE` of
    what would be available with it released, or always / never as `setting` says (`RELEASE_SETTINGS`).
    Where either amount is unknown, release. Returns whether it released."""
    if setting not in RELEASE_SETTINGS:
        raise ValueError(f"release setting {setting!r}: use one of {', '.join(RELEASE_SETTINGS)}")
    if setting == "never":
        return False
    if setting == "auto":
        held, available = held_free_bytes(), available_bytes()
        if held is not None and available is not None and held <= RELEASE_SHARE * (available + held):
            return False
    release_freed_memory()
    return True
