"""`art.yield_trajectory`, the reference's path: the same module object as `art.rollout.yield_trajectory` (names, private ones and patches included)."""

import importlib
import sys

from art.rollout.yield_trajectory import *  # noqa: F403  (its names, for type checkers)

sys.modules[__name__] = importlib.import_module("art.rollout.yield_trajectory")
