"""`art.pipeline_trainer.checkpoint_retention`, the reference's path: the same module object as `art.recipes.pipeline_trainer.checkpoint_retention` (names, private ones and patches included)."""

import importlib
import sys

from art.recipes.pipeline_trainer.checkpoint_retention import *  # noqa: F403  (its names, for type checkers)

sys.modules[__name__] = importlib.import_module("art.recipes.pipeline_trainer.checkpoint_retention")
