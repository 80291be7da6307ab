"""`art.utils.s3`, the reference's path: the same module object as `art.record.s3` (names, private ones and patches included)."""

import importlib
import sys

from art.record.s3 import *  # noqa: F403  (its names, for type checkers)

sys.modules[__name__] = importlib.import_module("art.record.s3")
