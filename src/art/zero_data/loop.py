"""`art.zero_data.loop`: the same module object as `art.recipes.zero_data.loop` (names, private ones and patches included)."""

import importlib
import sys

from art.recipes.zero_data.loop import *  # noqa: F403  (its names, for type checkers)

sys.modules[__name__] = importlib.import_module("art.recipes.zero_data.loop")
