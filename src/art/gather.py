"""`art.gather`, the reference's path: the same module object as `art.rollout.gather` (names, private ones and patches included)."""

import sys

from art.rollout import gather as _module
from art.rollout.gather import *  # noqa: F403  (its names, for type checkers)

sys.modules[__name__] = _module
