"""`art.serverless.backend`, the reference's path: the same module object as `art.backends.serverless` (names, private ones and patches included)."""

import importlib
import sys

from art.backends.serverless import *  # noqa: F403  (its names, for type checkers)

sys.modules[__name__] = importlib.import_module("art.backends.serverless")
