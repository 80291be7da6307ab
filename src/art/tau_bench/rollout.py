"""`art.tau_bench.rollout`, the reference's path: the same module object as `art.environments.tau_bench.rollout` (names, private ones and patches included)."""

import importlib
import sys

from art.environments.tau_bench.rollout import *  # noqa: F403  (its names, for type checkers)

sys.modules[__name__] = importlib.import_module("art.environments.tau_bench.rollout")
