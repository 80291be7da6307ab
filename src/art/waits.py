"""`art.waits`, the reference's path: the same module object as `art.common.waits` (names, private ones and patches included)."""

import importlib
import sys

from art.common.waits import *  # noqa: F403  (its names, for type checkers)

sys.modules[__name__] = importlib.import_module("art.common.waits")
