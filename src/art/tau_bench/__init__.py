"""`art.tau_bench`, the reference's path: the tau-bench client lives in `art.environments.tau_bench`.

The package is `art.environments.tau_bench`; every name resolves there (lazy ones on first use, as there).
"""

import importlib
from typing import TYPE_CHECKING, Any

import art.environments.tau_bench as _package
from art.environments.tau_bench import __all__ as __all__

for _submodule in ("client", "rollout"):  # the reference's submodules, under this name too
    importlib.import_module(f"{__name__}.{_submodule}")

if TYPE_CHECKING:
    from art.environments.tau_bench import *  # noqa: F403

globals().update({name: vars(_package)[name] for name in __all__ if name in vars(_package)})


def __getattr__(name: str) -> Any:
    return getattr(_package, name)
