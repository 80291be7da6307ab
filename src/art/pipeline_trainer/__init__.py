"""`art.pipeline_trainer`, the reference's path: PipelineTrainer lives in `art.recipes.pipeline_trainer`.

The package is `art.recipes.pipeline_trainer`; every name resolves there (lazy ones on first use, as there).
"""

from typing import TYPE_CHECKING

import art.recipes.pipeline_trainer as _package
from art.common.aliases import alias_package
from art.recipes.pipeline_trainer import __all__ as __all__

if TYPE_CHECKING:
    from art.recipes.pipeline_trainer import *  # noqa: F403

# the reference's submodules are imported under this name too
__getattr__ = alias_package(
    __name__, _package, ("checkpoint_retention", "state", "status", "trainer", "types")
)
