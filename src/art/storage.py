"""`art.storage`, the reference's path: the same module object as `art.record.storage` (names, private ones and patches included)."""

import importlib
import sys

from art.record.storage import *  # noqa: F403  (its names, for type checkers)

sys.modules[__name__] = importlib.import_module("art.record.storage")
