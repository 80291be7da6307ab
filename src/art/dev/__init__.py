"""`art.dev`: the reference's experimental settings, as typed dicts, so its examples run unchanged.

    model = art.TrainableModel(name="m", project="p", base_model="...",
                               _internal_config=art.dev.InternalModelConfig(
                                   init_args=art.dev.InitArgs(max_seq_length=8192)))

These are plain dicts (TypedDicts: calling one builds a dict, nothing is checked at run time). What a
`LocalBackend` does with each key is in `art.backends.internal_config`: the context window, batch size,
dtype and number of loaded adapters apply; the rest (GPU memory fractions, Unsloth, vLLM and trainer
switches) has no effect here and warns once; a GPU layout the reference refuses
(`validate_dedicated_config`) is refused at `register`. See docs/compat.md.
"""

from art.dev.engine import EngineArgs
from art.dev.model import (
    BackendModelConfig,
    InitArgs,
    InternalModelConfig,
    LoRAConfig,
    PeftArgs,
    TinkerArgs,
    TinkerNativeArgs,
    TinkerTrainingClientArgs,
    TrainerArgs,
)
from art.dev.openai_server import OpenAIServerConfig, ServerArgs, get_openai_server_config
from art.dev.train import TrainConfig, TrainSFTConfig
from art.dev.validate import is_dedicated_mode, validate_dedicated_config

__all__ = [
    "BackendModelConfig",
    "EngineArgs",
    "InitArgs",
    "InternalModelConfig",
    "LoRAConfig",
    "OpenAIServerConfig",
    "PeftArgs",
    "ServerArgs",
    "TinkerArgs",
    "TinkerNativeArgs",
    "TinkerTrainingClientArgs",
    "TrainConfig",
    "TrainSFTConfig",
    "TrainerArgs",
    "get_openai_server_config",
    "is_dedicated_mode",
    "validate_dedicated_config",
]
