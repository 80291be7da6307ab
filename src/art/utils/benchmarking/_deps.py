"""The install hint every benchmarking module names when an optional dependency is missing."""

from __future__ import annotations

INSTALL = "pip install 'agent-reinforcement-trainer[benchmarking]'"


def missing(what: str) -> ImportError:
    """The error raised when `what` (polars, matplotlib) is not installed."""
    return ImportError(f"art.utils.benchmarking needs {what}, which is not installed: {INSTALL}")
