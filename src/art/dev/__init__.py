"""`art.dev`: the reference's experimental settings, as typed dicts, so its examples run unchanged.

    model = art.TrainableModel(name="m", project="p", base_model="...",
                               _internal_config=art.dev.InternalModelConfig(
                                   init_args=art.dev.InitArgs(max_seq_length=8192)))

These are plain dicts (TypedDicts: calling one builds a dict, nothing is checked at run time). What a
`LocalBackend` does with each key is in `art.backends.internal_config`: the context window, batch size,
dtype and number of loaded adapters apply; the rest (GPU memory fractions, Unsloth, vLLM and trainer
switches) has no effect here and warns once. See docs/compat.md.
"""

from .engine import EngineArgs
from .model import BackendModelConfig, InitArgs, InternalModelConfig, LoRAConfig, PeftArgs, TrainerArgs
from .openai_server import OpenAIServerConfig, ServerArgs
from .train import TrainConfig, TrainSFTConfig

__all__ = [
    "BackendModelConfig",
    "EngineArgs",
    "InitArgs",
    "InternalModelConfig",
    "LoRAConfig",
    "OpenAIServerConfig",
    "PeftArgs",
    "ServerArgs",
    "TrainConfig",
    "TrainSFTConfig",
    "TrainerArgs",
]
