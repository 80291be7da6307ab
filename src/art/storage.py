"""`art.storage`, the reference's path: the same module object as `art.record.storage` (names, private ones and patches included)."""

import sys

from art.record import storage as _module
from art.record.storage import *  # noqa: F403  (its names, for type checkers)

sys.modules[__name__] = _module
