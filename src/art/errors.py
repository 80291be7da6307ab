"""`art.errors`, the reference's path: the same module object as `art.common.errors` (names, private ones and patches included)."""

import importlib
import sys

from art.common.errors import *  # noqa: F403  (its names, for type checkers)

sys.modules[__name__] = importlib.import_module("art.common.errors")
