"""`art.utils.trajectory_logging`, the reference's path: the same module object as `art.record.parquet` (names, private ones and patches included)."""

import importlib
import sys

from art.record.parquet import *  # noqa: F403  (its names, for type checkers)

sys.modules[__name__] = importlib.import_module("art.record.parquet")
