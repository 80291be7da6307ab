"""`art.costs`, the reference's path: the same module object as `art.metrics.costs` (names, private ones and patches included)."""

import sys

from art.metrics import costs as _module
from art.metrics.costs import *  # noqa: F403  (its names, for type checkers)

sys.modules[__name__] = _module
