"""`art.serverless.client`, the reference's path: the same module object as `art.backends.serverless_client` (names, private ones and patches included)."""

import sys

from art.backends import serverless_client as _module
from art.backends.serverless_client import *  # noqa: F403  (its names, for type checkers)

sys.modules[__name__] = _module
