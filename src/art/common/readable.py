"""`ReadableModel`: a pydantic `BaseModel` whose `help()` shows our documentation, not pydantic's internals.

`help(art.TrainableModel)` listed 549 lines: every method pydantic adds (`model_dump`, `model_validate`,
... with pydoc's full text of each) and a dozen `__pydantic_*__` attributes, burying the class's own
docstring and methods. pydoc lists what `dir(cls)` returns, and a class's `dir` comes from its metaclass, so
this metaclass narrows it to what our classes define (dunder methods we wrote included). Instances, fields,
validation and every pydantic method are untouched (`dir(instance)` is unchanged; `model_dump` still works).

A leaf module: it imports pydantic only, so the leaf modules (`types`, `trajectories`) may use it.
"""

from __future__ import annotations

import inspect

from pydantic import BaseModel
from pydantic._internal._model_construction import ModelMetaclass

_PYDANTIC_ATTRIBUTES = {"model_config", "model_fields", "model_computed_fields"}


class _OwnNamesInHelp(ModelMetaclass):
    """A pydantic metaclass whose `dir(cls)` holds only the names our classes define (see the module)."""

    def __dir__(cls) -> list[str]:
        names: set[str] = set()
        for klass in cls.__mro__:
            if klass is object or klass.__module__.startswith("pydantic") or klass is ReadableModel:
                continue
            for name, value in vars(klass).items():
                if name in _PYDANTIC_ATTRIBUTES or getattr(value, "__module__", "").startswith("pydantic"):
                    continue  # e.g. the `model_post_init` pydantic adds to classes with private attributes
                if name.startswith("__") and not (inspect.isfunction(value) and name != "__init__"):
                    continue  # pydantic's and Python's bookkeeping; dunder methods we wrote stay
                names.add(name)
        return sorted(names)


class ReadableModel(BaseModel, metaclass=_OwnNamesInHelp):
    """A pydantic model whose `help()` starts with, and keeps to, our own docstrings and methods."""
