"""`art.api_costs`, the reference's path: the same module object as `art.metrics.api_costs` (names, private ones and patches included)."""

import sys

from art.metrics import api_costs as _module
from art.metrics.api_costs import *  # noqa: F403  (its names, for type checkers)

sys.modules[__name__] = _module
