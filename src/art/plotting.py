"""`art.plotting`, the reference's path: the same module object as `art.record.plots` (names, private ones and patches included)."""

import sys

from art.record import plots as _module
from art.record.plots import *  # noqa: F403  (its names, for type checkers)

sys.modules[__name__] = _module
