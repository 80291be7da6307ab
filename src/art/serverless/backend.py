"""`art.serverless.backend`, the reference's path: the same module object as `art.backends.serverless` (names, private ones and patches included)."""

import sys

from art.backends import serverless as _module
from art.backends.serverless import *  # noqa: F403  (its names, for type checkers)

sys.modules[__name__] = _module
