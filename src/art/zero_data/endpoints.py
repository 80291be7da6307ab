"""`art.zero_data.endpoints`: the same module object as `art.recipes.zero_data.endpoints` (names, private ones and patches included)."""

import importlib
import sys

from art.recipes.zero_data.endpoints import *  # noqa: F403  (its names, for type checkers)

sys.modules[__name__] = importlib.import_module("art.recipes.zero_data.endpoints")
