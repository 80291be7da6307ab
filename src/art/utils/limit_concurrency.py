"""`art.utils.limit_concurrency`, the reference's path: the same module object as `art.common.limit_concurrency` (names, private ones and patches included)."""

import importlib
import sys

from art.common.limit_concurrency import *  # noqa: F403  (its names, for type checkers)

sys.modules[__name__] = importlib.import_module("art.common.limit_concurrency")
