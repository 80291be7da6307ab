"""`art.mcp`, the reference's path: MCP-RL lives in `art.recipes.mcp_rl`.

The package is `art.recipes.mcp_rl`; every name resolves there (lazy ones on first use, as there).
"""

from typing import TYPE_CHECKING

import art.recipes.mcp_rl as _package
from art.common.aliases import alias_package
from art.recipes.mcp_rl import __all__ as __all__

if TYPE_CHECKING:
    from art.recipes.mcp_rl import *  # noqa: F403

# the reference's submodules are imported under this name too
__getattr__ = alias_package(__name__, _package, ("default_tools", "generate_scenarios", "types"))
