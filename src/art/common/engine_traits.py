"""What each engine is, for the checks and steps that differ by engine: declared once per engine here and
asked for by the engine's name (`ENGINE_TRAITS[options.engine].in_process`), never by comparing names.

Light (no torch, nothing of `art.engines`): `art.common.scale_checks` reads it while `art.types` validates
`RuntimeOptions`, and `art launch` reads it on a machine with no engine installed. How an engine is checked,
where it puts the trainer and how it starts is the heavy registry, `art.engines.factory.ENGINES`. Both are
keyed by the names of `art.types.EngineName` (tests/test_one_owner.py checks the three agree).

    >>> ENGINE_TRAITS["torch"].in_process, ENGINE_TRAITS["vllm"].pip_install
    (True, 'vllm')
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class EngineTraits:
    """What the checks and steps outside the engine need to know about one engine."""

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


ENGINE_TRAITS: dict[str, EngineTraits] = {
    "torch": EngineTraits(in_process=True, parallel_devices=False, takes_chat_template=True),
    "vllm": EngineTraits(
        in_process=False, parallel_devices=True, takes_chat_template=False, pip_install="vllm"
    ),
}
"""Every engine `RuntimeOptions.engine` names (`art.types.EngineName`), by name: a new engine is one entry
here, one in `art.engines.factory.ENGINES` and its name in `EngineName`."""
