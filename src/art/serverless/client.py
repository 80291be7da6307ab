"""`art.serverless.client`, the reference's path: the same module object as `art.backends.serverless_client` (names, private ones and patches included)."""

import importlib
import sys

from art.backends.serverless_client import *  # noqa: F403  (its names, for type checkers)

sys.modules[__name__] = importlib.import_module("art.backends.serverless_client")
