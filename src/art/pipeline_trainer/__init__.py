"""`art.pipeline_trainer`, the reference's path: PipelineTrainer lives in `art.recipes.pipeline_trainer`.

The package is `art.recipes.pipeline_trainer`; every name resolves there (lazy ones on first use, as there).
"""

import importlib
from typing import TYPE_CHECKING, Any

import art.recipes.pipeline_trainer as _package
from art.recipes.pipeline_trainer import __all__ as __all__

for _submodule in (
    "checkpoint_retention",
    "state",
    "status",
    "trainer",
    "types",
):  # the reference's submodules, under this name too
    importlib.import_module(f"{__name__}.{_submodule}")

if TYPE_CHECKING:
    from art.recipes.pipeline_trainer import *  # noqa: F403

globals().update({name: vars(_package)[name] for name in __all__ if name in vars(_package)})


def __getattr__(name: str) -> Any:
    return getattr(_package, name)
