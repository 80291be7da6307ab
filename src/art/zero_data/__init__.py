"""`art.zero_data`: the zero-data GRPO loop lives in `art.recipes.zero_data`.

The package is `art.recipes.zero_data`; every name resolves there (lazy ones on first use, as there).
"""

import importlib
from typing import TYPE_CHECKING, Any

import art.recipes.zero_data as _package
from art.recipes.zero_data import __all__ as __all__

for _submodule in ("endpoints",):  # the reference's submodules, under this name too
    importlib.import_module(f"{__name__}.{_submodule}")

if TYPE_CHECKING:
    from art.recipes.zero_data import *  # noqa: F403

globals().update({name: vars(_package)[name] for name in __all__ if name in vars(_package)})


def __getattr__(name: str) -> Any:
    return getattr(_package, name)
