"""`art.tau_bench.client`, the reference's path: the same module object as `art.environments.tau_bench.client` (names, private ones and patches included)."""

import importlib
import sys

from art.environments.tau_bench.client import *  # noqa: F403  (its names, for type checkers)

sys.modules[__name__] = importlib.import_module("art.environments.tau_bench.client")
