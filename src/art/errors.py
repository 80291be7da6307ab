"""`art.errors`, the reference's path: the same module object as `art.common.errors` (names, private ones and patches included)."""

import sys

from art.common import errors as _module
from art.common.errors import *  # noqa: F403  (its names, for type checkers)

sys.modules[__name__] = _module
