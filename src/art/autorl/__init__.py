"""`art.autorl`: AutoRL lives in `art.recipes.autorl`.

The package is `art.recipes.autorl`; every name resolves there (lazy ones on first use, as there).
"""

from typing import TYPE_CHECKING, Any

import art.recipes.autorl as _package
from art.recipes.autorl import __all__ as __all__

if TYPE_CHECKING:
    from art.recipes.autorl import *  # noqa: F403

globals().update({name: vars(_package)[name] for name in __all__ if name in vars(_package)})


def __getattr__(name: str) -> Any:
    return getattr(_package, name)
