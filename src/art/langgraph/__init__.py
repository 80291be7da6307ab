"""`art.langgraph`, the reference's path: the LangGraph integration lives in `art.integrations.langgraph`.

The package is `art.integrations.langgraph`; every name resolves there (lazy ones on first use, as there).
"""

import importlib
from typing import TYPE_CHECKING, Any

import art.integrations.langgraph as _package
from art.integrations.langgraph import __all__ as __all__

for _submodule in ("llm_wrapper",):  # the reference's submodules, under this name too
    importlib.import_module(f"{__name__}.{_submodule}")

if TYPE_CHECKING:
    from art.integrations.langgraph import *  # noqa: F403

globals().update({name: vars(_package)[name] for name in __all__ if name in vars(_package)})


def __getattr__(name: str) -> Any:
    return getattr(_package, name)
