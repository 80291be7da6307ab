"""`art.api_costs`, the reference's path: the same module object as `art.metrics.api_costs` (names, private ones and patches included)."""

import importlib
import sys

from art.metrics.api_costs import *  # noqa: F403  (its names, for type checkers)

sys.modules[__name__] = importlib.import_module("art.metrics.api_costs")
