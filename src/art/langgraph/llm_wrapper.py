"""`art.langgraph.llm_wrapper`, the reference's path: the same module object as `art.integrations.langgraph.llm_wrapper` (names, private ones and patches included)."""

import importlib
import sys

from art.integrations.langgraph.llm_wrapper import *  # noqa: F403  (its names, for type checkers)

sys.modules[__name__] = importlib.import_module("art.integrations.langgraph.llm_wrapper")
