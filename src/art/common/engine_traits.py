"""The one list of engines: `ENGINE_TRAITS`, what each engine is, asked for by the engine's name
(`ENGINE_TRAITS[options.engine].in_process`), never by comparing names. `EngineName` is its names as a type
(checked equal to the table's keys when this module loads), and each entry names the module that starts the
engine (`start_module`, whose `KIND` is its `art.engines.base.EngineKind`: how it is checked, where it puts
the trainer, how it starts), which `art.engines.factory` imports when the engine is asked for.

Light (no torch, nothing of `art.engines`): `art.common.scale_checks` reads it while `art.types` validates
`RuntimeOptions`, and `art launch` reads it on a machine with no engine installed. A new engine is one entry
here, its name in `EngineName`, and its package under art/engines/ with a `start.py`.

    >>> ENGINE_TRAITS["torch"].in_process, ENGINE_TRAITS["vllm"].pip_install
    (True, 'vllm')
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, get_args

EngineName = Literal["torch", "vllm"]
"""The names `RuntimeOptions.engine` takes: the keys of `ENGINE_TRAITS`, as a type."""


@dataclass(frozen=True)
class EngineTraits:
    """What the checks and steps outside the engine need to know about one engine."""

    start_module: str
    """The module whose `KIND` (`art.engines.base.EngineKind`) checks and starts the engine."""

    in_process: bool
    """It serves from the trainer's process, the very model object the trainer trains: one replica, and no
    GPUs of its own apart from the trainer's (dedicated mode needs an engine that is not in process)."""
    parallel_devices: bool
    """It has its own tensor and data parallelism (`tensor_parallel_size`, `inference_replicas`): it spans
    several GPUs, dedicated ones (`inference_gpu_ids`), as many as it uses."""
    takes_chat_template: bool
    """It serves with a chat template given to ART (`_internal_config`), not only the model's own."""
    pip_install: str | None = None
    """The package a cloud node installs for it besides ART (`art launch`'s setup); None: ART is enough."""


ENGINE_TRAITS: dict[EngineName, EngineTraits] = {
    "torch": EngineTraits(
        "art.engines.torch.start", in_process=True, parallel_devices=False, takes_chat_template=True
    ),
    "vllm": EngineTraits(
        "art.engines.vllm.start",
        in_process=False,
        parallel_devices=True,
        takes_chat_template=False,
        pip_install="vllm",
    ),
}
"""Every engine, by name (see the module docstring)."""

if set(get_args(EngineName)) != set(ENGINE_TRAITS):  # the type and the table are one list, or nothing loads
    raise RuntimeError(f"EngineName {get_args(EngineName)} and ENGINE_TRAITS {tuple(ENGINE_TRAITS)} differ")
