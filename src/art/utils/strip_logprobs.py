"""`strip_logprobs(obj)`: a copy of any nested structure without its logprobs (the reference's helper, e.g.
for `weave.init(..., global_postprocess_output=strip_logprobs)`), so traces stay small.

    >>> strip_logprobs({"a": 1, "logprobs": [0.1], "b": [{"logprobs": None, "c": 2}]})
    {'a': 1, 'b': [{'c': 2}]}

Dict keys named "logprobs" are removed; objects (pydantic models, `Choice`s, dataclasses) keep the
attribute, set to None. The input is never changed: it is deep-copied first (if that fails, it is
returned as is, with a warning in the log).
"""

from __future__ import annotations

import copy
import logging
from typing import Any

logger = logging.getLogger(__name__)


def strip_logprobs(obj: Any) -> Any:
    """A deep copy of `obj` with every `logprobs` removed (dict key) or set to None (attribute)."""
    try:
        copied = copy.deepcopy(obj)
    except Exception as exc:  # an uncopyable object (a lock, a socket...): leave it alone
        logger.warning(
            "Failed to deepcopy object in strip_logprobs (a %s: %s). Returning original object unchanged.",
            type(obj).__name__,
            exc,
        )
        return obj
    return _strip(copied, set())


def _strip(obj: Any, seen: set[int]) -> Any:
    if isinstance(obj, dict):
        return {k: _strip(v, seen) for k, v in obj.items() if k != "logprobs"}
    if isinstance(obj, list | tuple):
        items = [_strip(v, seen) for v in obj]
        return tuple(items) if isinstance(obj, tuple) else items
    if hasattr(obj, "__dict__") and not isinstance(obj, type) and id(obj) not in seen:
        seen.add(id(obj))  # objects may refer to each other
        for key, value in list(vars(obj).items()):
            object.__setattr__(obj, key, None if key == "logprobs" else _strip(value, seen))
    return obj
