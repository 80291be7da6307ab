"""`art.mcp.generate_scenarios`, the reference's path: the same module object as `art.recipes.mcp_rl.generate_scenarios` (names, private ones and patches included)."""

import importlib
import sys

from art.recipes.mcp_rl.generate_scenarios import *  # noqa: F403  (its names, for type checkers)

sys.modules[__name__] = importlib.import_module("art.recipes.mcp_rl.generate_scenarios")
