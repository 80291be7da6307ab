"""LiteLLM, imported so that its import never reaches the network, and the environment left as it was.

LiteLLM fetches a price table from the internet when it is imported (seconds of stall offline, a price
table that changes under a run online) unless `LITELLM_LOCAL_MODEL_COST_MAP` is set, and it reads that
setting only from the environment, only at its import. `import_litellm` sets it for the import alone when
the user has not set it, and removes it again after: the only place our code touches the environment for
LiteLLM, and it leaves nothing behind (a user's own value is never changed).

Example:
    litellm = import_litellm()
    litellm.get_model_info("openai/gpt-4.1")
"""

from __future__ import annotations

import os
import sys
import threading
from typing import Any

LOCAL_COST_MAP = "LITELLM_LOCAL_MODEL_COST_MAP"
_lock = threading.Lock()


def import_litellm() -> Any:
    """The `litellm` module, imported with its bundled price map (see the module docstring).

    ImportError when LiteLLM is not installed (callers check `importlib.util.find_spec("litellm")` first)."""
    loaded = sys.modules.get("litellm")
    if loaded is not None:
        return loaded
    with _lock:
        if LOCAL_COST_MAP in os.environ:
            import litellm

            return litellm
        os.environ[LOCAL_COST_MAP] = "True"
        try:
            import litellm
        finally:
            os.environ.pop(LOCAL_COST_MAP, None)
        return litellm
