"""`art.plotting`, the reference's path: the same module object as `art.record.plots` (names, private ones and patches included)."""

import importlib
import sys

from art.record.plots import *  # noqa: F403  (its names, for type checkers)

sys.modules[__name__] = importlib.import_module("art.record.plots")
