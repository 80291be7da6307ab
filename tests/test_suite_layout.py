"""The test suite's own layout: it collects as one piece.

tests/ has no `__init__.py` files, so pytest imports each test module (and each helper module a test
imports) under its bare file name: two files of one name in different folders break the collection of the
whole suite ("import file mismatch"), which CI reports as an error before any test runs.
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

TESTS = Path(__file__).parent


def test_every_module_under_tests_has_a_name_of_its_own() -> None:
    by_name: dict[str, list[str]] = defaultdict(list)
    for path in TESTS.rglob("*.py"):
        if path.name in ("conftest.py", "__init__.py") or "__pycache__" in path.parts:
            continue
        by_name[path.name].append(str(path.relative_to(TESTS)))
    assert len(by_name) > 50  # the walk found the suite
    clashes = {name: sorted(paths) for name, paths in by_name.items() if len(paths) > 1}
    assert not clashes, f"rename one of each: {clashes}"
