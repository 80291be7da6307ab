"""`art.guided_completion`, the reference's path: the same module object as `art.rollout.guided_completion` (names, private ones and patches included)."""

import importlib
import sys

from art.rollout.guided_completion import *  # noqa: F403  (its names, for type checkers)

sys.modules[__name__] = importlib.import_module("art.rollout.guided_completion")
