"""`art.cli_checks`: the same module object as `art.cli.checks` (names, private ones and patches included)."""

import importlib
import sys

from art.cli.checks import *  # noqa: F403  (its names, for type checkers)

sys.modules[__name__] = importlib.import_module("art.cli.checks")
