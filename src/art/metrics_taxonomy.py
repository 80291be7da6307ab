"""`art.metrics_taxonomy`, the reference's path: the same module object as `art.metrics.taxonomy` (names, private ones and patches included)."""

import importlib
import sys

from art.metrics.taxonomy import *  # noqa: F403  (its names, for type checkers)

sys.modules[__name__] = importlib.import_module("art.metrics.taxonomy")
