"""`art.metrics_taxonomy`, the reference's path: the same module object as `art.metrics.taxonomy` (names, private ones and patches included)."""

import sys

from art.metrics import taxonomy as _module
from art.metrics.taxonomy import *  # noqa: F403  (its names, for type checkers)

sys.modules[__name__] = _module
