"""`art.langgraph.llm_wrapper`, the reference's path: the same module object as `art.recipes.langgraph.llm_wrapper` (names, private ones and patches included)."""

import importlib
import sys

from art.recipes.langgraph.llm_wrapper import *  # noqa: F403  (its names, for type checkers)

sys.modules[__name__] = importlib.import_module("art.recipes.langgraph.llm_wrapper")
