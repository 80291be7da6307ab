"""Trainer checkpoints on disk: PEFT adapter + AdamW state + trainer state, safetensors and JSON only.

A checkpoint folder holds
- `adapter_config.json`, `adapter_model.safetensors`: the PEFT adapter (what the engine and peft load);
- `optimizer.safetensors`: AdamW moments and step counts, keyed `{parameter name}.{exp_avg|exp_avg_sq|step}`;
- `trainer_state.json`: format version, optimizer hyper-parameters, parameter names, steps taken.
Nothing is pickled (no `torch.save`), so loading a checkpoint can never run code. Atomicity (temporary
folder + rename) is the caller's business.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import load_file, save_file

ADAPTER_CONFIG = "adapter_config.json"
ADAPTER_WEIGHTS = "adapter_model.safetensors"
OPTIMIZER_FILE = "optimizer.safetensors"
STATE_FILE = "trainer_state.json"
IMPLEMENTATION_KEYS = ("foreach", "fused", "capturable", "differentiable")
FORMAT_VERSION = 1


def optimizer_tensors(optimizer: torch.optim.Optimizer, names: list[str]) -> dict[str, torch.Tensor]:
    """The AdamW state of `optimizer` over parameters `names`, keyed `{name}.{exp_avg|exp_avg_sq|step}`
    (this process's tensors as they are: a sharded trainer gathers each to a whole one)."""
    params = optimizer.param_groups[0]["params"]
    assert len(params) == len(names), "one optimizer parameter group over the named LoRA parameters"
    tensors: dict[str, torch.Tensor] = {}
    for name, param in zip(names, params, strict=True):
        for key, value in optimizer.state.get(param, {}).items():
            if isinstance(value, torch.Tensor):
                tensors[f"{name}.{key}"] = value.detach()
    return tensors


def save_optimizer(
    path: Path,
    optimizer: torch.optim.Optimizer,
    names: list[str],
    trainer_state: dict[str, Any],
    tensors: dict[str, torch.Tensor] | None = None,
) -> None:
    """Write `optimizer.safetensors` and `trainer_state.json` for `optimizer` over parameters `names`
    (`tensors`: its state as `optimizer_tensors` names it, when given instead of its own)."""
    if tensors is None:
        tensors = optimizer_tensors(optimizer, names)
    save_file({k: v.contiguous().cpu() for k, v in tensors.items()}, str(path / OPTIMIZER_FILE))
    group = {k: v for k, v in optimizer.param_groups[0].items() if k != "params"}
    state = {
        "format": FORMAT_VERSION,
        "param_names": names,
        "optimizer": {k: list(v) if isinstance(v, tuple) else v for k, v in group.items()},
        **trainer_state,
    }
    (path / STATE_FILE).write_text(json.dumps(state, indent=2, sort_keys=True))


def load_optimizer(path: Path, optimizer: torch.optim.Optimizer, names: list[str]) -> dict[str, Any]:
    """Restore the state written by `save_optimizer` into `optimizer`; returns the trainer state dict.

    Raises ValueError when the checkpoint's parameters do not match this trainer's.
    """
    state = json.loads((path / STATE_FILE).read_text())
    if state.get("format") != FORMAT_VERSION:
        raise ValueError(f"{path / STATE_FILE}: unknown trainer state format {state.get('format')!r}")
    if state["param_names"] != names:
        raise ValueError(
            f"{path}: the checkpoint's LoRA parameters do not match this trainer's "
            "(different base model, LoRA config or target modules)"
        )
    tensors = load_file(str(path / OPTIMIZER_FILE))
    full = optimizer.state_dict()
    index_of = {name: i for i, name in enumerate(names)}
    per_param: dict[int, dict[str, torch.Tensor]] = {}
    for key, tensor in tensors.items():
        name, field = key.rsplit(".", 1)
        per_param.setdefault(index_of[name], {})[field] = tensor
    full["state"] = per_param
    saved_group = state.get("optimizer", {})
    for key, value in saved_group.items():
        if key in IMPLEMENTATION_KEYS:  # how this optimizer computes (e.g. fused) is this process's choice
            continue
        if key in full["param_groups"][0]:
            full["param_groups"][0][key] = tuple(value) if isinstance(value, list) else value
    optimizer.load_state_dict(full)
    return dict(state)
