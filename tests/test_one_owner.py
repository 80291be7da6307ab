"""One owner per setting: each default is defined once (art.types), loss names live in `art.types` only,
engines are a registry, and the torch engine takes its batch size from one place."""

from __future__ import annotations

import ast
import inspect
import re
from pathlib import Path
from typing import get_args

import pytest
from helpers_source import SRC, code_strings

from art.types import LOSS_FNS, EngineName, LossFn

TYPES = SRC / "types.py"
LEARNING_RATES = {
    "learning_rate",
    "peak_lr",
}  # a setting; not `lr=` of an optimizer built before a step sets it


def test_loss_names_are_spelled_in_types_only() -> None:
    """`"cispo"`, `"ppo"` as code: only art/types.py (the reference's `experimental_config.ppo` flag of
    `art serve`'s serverless routes is a key of its config, not the name of our loss)."""
    allowed = {("serve/serverless.py", "ppo")}
    stray = [
        f"{p.relative_to(SRC)}:{n.lineno} {n.value!r}"
        for p in sorted(SRC.rglob("*.py"))
        if p != TYPES
        for n in code_strings(ast.parse(p.read_text()))
        if n.value in LOSS_FNS and (p.relative_to(SRC).as_posix(), n.value) not in allowed
    ]
    assert stray == [], f"name losses through art.types (LossFn, LOSS_FNS, DEFAULT_LOSS_FN): {stray}"


def test_every_loss_name_has_its_function() -> None:
    pytest.importorskip("torch")
    from art.training.losses import PER_TOKEN_LOSSES

    assert tuple(PER_TOKEN_LOSSES) == LOSS_FNS == get_args(LossFn)


def test_learning_rate_defaults_are_defined_in_types_only() -> None:
    """No parameter, field or keyword named like a learning rate gets a number literal outside art/types.py
    (a default written twice drifts: it lived in 5 places)."""
    stray = []
    for path in sorted(SRC.rglob("*.py")):
        if path == TYPES:
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            pairs: list[tuple[str, ast.expr]] = []
            if isinstance(node, ast.arguments):
                positional = node.posonlyargs + node.args
                pairs += list(
                    zip(
                        [a.arg for a in positional[len(positional) - len(node.defaults) :]],
                        node.defaults,
                        strict=True,
                    )
                )
                pairs += [
                    (a.arg, d)
                    for a, d in zip(node.kwonlyargs, node.kw_defaults, strict=True)
                    if d is not None
                ]
            elif (
                isinstance(node, ast.AnnAssign)
                and isinstance(node.target, ast.Name)
                and node.value is not None
            ):
                value = node.value
                if isinstance(value, ast.Call):  # Field(default=...)
                    value = next((k.value for k in value.keywords if k.arg == "default"), value)
                pairs.append((node.target.id, value))
            elif isinstance(node, ast.Call):
                pairs += [(k.arg, k.value) for k in node.keywords if k.arg]
            for name, value in pairs:
                if (
                    name in LEARNING_RATES
                    and isinstance(value, ast.Constant)
                    and isinstance(value.value, float)
                    and value.value != 0.0  # a placeholder the step fills in, not a rate
                ):
                    stray.append(f"{path.relative_to(SRC)}:{value.lineno} {name}={value.value}")
    assert stray == [], f"use the named defaults of art.types: {stray}"


def test_engines_are_a_registry_of_every_engine_name() -> None:
    from art.engines.factory import ENGINES

    assert tuple(ENGINES) == get_args(EngineName)
    source = (SRC / "engines" / "factory.py").read_text()
    assert not re.search(r"\.engine\s*(==|!=|in\b)", source)  # chosen by the registry, not by an if-chain


def test_the_torch_engine_takes_its_batch_limits_from_the_runtime_options() -> None:
    pytest.importorskip("torch")
    from art.engines.torch.torch_engine import TorchEngine

    for function in (TorchEngine.__init__, TorchEngine.from_pretrained):
        parameters = inspect.signature(function).parameters
        assert parameters["max_num_seqs"].default is None and parameters["max_model_len"].default is None
    from art.engines import factory

    assert "max_num_seqs" not in inspect.getsource(factory._start_torch)  # given once: in the options


async def test_native_bf16_is_handed_down_not_set_process_wide(tiny_model_path: Path) -> None:
    """Two engines of one process with different `RuntimeOptions.native_bf16` keep their own setting (the
    kernels take it per call; there is no process-wide switch a second service could flip)."""
    pytest.importorskip("torch")
    from art.engines.torch.torch_engine import TorchEngine
    from art.kernels import cpp_kernels
    from art.types import RuntimeOptions

    assert not hasattr(cpp_kernels, "allow_native_bf16")
    off = TorchEngine.from_pretrained(
        str(tiny_model_path), dtype="float32", num_threads=1, options=RuntimeOptions(native_bf16=False)
    )
    on = TorchEngine.from_pretrained(str(tiny_model_path), dtype="float32", num_threads=1)
    try:
        assert off._forward.native_bf16 is False and on._forward.native_bf16 is True
        assert off._forward.decode_attention._native_bf16 is False
    finally:
        await off.close()
        await on.close()
