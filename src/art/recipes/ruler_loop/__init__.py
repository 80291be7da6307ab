"""What the zero-data recipes (MCP-RL and AutoRL) share: generator and judge endpoints, structured
generation, and the RULER-scored GRPO loop with validation against the base model.

Client side only: nothing here imports torch (the loop starts a `LocalBackend` only when given none).
"""

from art.recipes.ruler_loop.endpoints import SELF, NotConfiguredError, llm_spec, self_judge
from art.recipes.ruler_loop.structured import GeneratorError, generate_structured

__all__ = [
    "SELF",
    "GeneratorError",
    "NotConfiguredError",
    "generate_structured",
    "llm_spec",
    "self_judge",
]
