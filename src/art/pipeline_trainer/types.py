"""`art.pipeline_trainer.types`, the reference's path: the same module object as `art.recipes.pipeline_trainer.types` (names, private ones and patches included)."""

import importlib
import sys

from art.recipes.pipeline_trainer.types import *  # noqa: F403  (its names, for type checkers)

sys.modules[__name__] = importlib.import_module("art.recipes.pipeline_trainer.types")
