"""`art.tau_bench`, the reference's path: the tau-bench client lives in `art.environments.tau_bench`.

The package is `art.environments.tau_bench`; every name resolves there (lazy ones on first use, as there).
"""

from typing import TYPE_CHECKING

import art.environments.tau_bench as _package
from art.common.aliases import alias_package
from art.environments.tau_bench import __all__ as __all__

if TYPE_CHECKING:
    from art.environments.tau_bench import *  # noqa: F403

# the reference's submodules are imported under this name too
__getattr__ = alias_package(__name__, _package, ("client", "rollout"))
