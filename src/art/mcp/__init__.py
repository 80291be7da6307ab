"""`art.mcp`, the reference's path: MCP-RL lives in `art.recipes.mcp_rl`.

The package is `art.recipes.mcp_rl`; every name resolves there (lazy ones on first use, as there).
"""

import importlib
from typing import TYPE_CHECKING, Any

import art.recipes.mcp_rl as _package
from art.recipes.mcp_rl import __all__ as __all__

for _submodule in (
    "default_tools",
    "generate_scenarios",
    "types",
):  # the reference's submodules, under this name too
    importlib.import_module(f"{__name__}.{_submodule}")

if TYPE_CHECKING:
    from art.recipes.mcp_rl import *  # noqa: F403

globals().update({name: vars(_package)[name] for name in __all__ if name in vars(_package)})


def __getattr__(name: str) -> Any:
    return getattr(_package, name)
