"""A package under the reference's path that is another name for one of ours (`art.mcp` for
`art.recipes.mcp_rl`, `art.pipeline_trainer`, `art.tau_bench`).

Example, a whole alias package's `__init__.py`:
    import art.recipes.mcp_rl as _package
    from art.common.aliases import alias_package
    from art.recipes.mcp_rl import __all__ as __all__

    if TYPE_CHECKING:
        from art.recipes.mcp_rl import *

    __getattr__ = alias_package(__name__, _package, ("default_tools", "generate_scenarios", "types"))
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Iterable
from types import ModuleType
from typing import Any


def alias_package(name: str, package: ModuleType, submodules: Iterable[str]) -> Callable[[str], Any]:
    """Make module `name` (being imported) another path to `package`: `submodules` (the reference's) are
    imported under `name` too, `package`'s public names already loaded are copied into it, and the returned
    function, the alias's `__getattr__`, resolves the rest (lazy ones on first use, as in `package`)."""
    for submodule in submodules:
        importlib.import_module(f"{name}.{submodule}")
    public: list[str] = package.__all__
    vars(sys.modules[name]).update({n: vars(package)[n] for n in public if n in vars(package)})

    def resolve(attribute: str) -> Any:
        return getattr(package, attribute)

    return resolve
