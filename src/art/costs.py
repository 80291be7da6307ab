"""`art.costs`, the reference's path: the same module object as `art.metrics.costs` (names, private ones and patches included)."""

import importlib
import sys

from art.metrics.costs import *  # noqa: F403  (its names, for type checkers)

sys.modules[__name__] = importlib.import_module("art.metrics.costs")
