"""One owner per setting: each default is defined once (art.types), loss names live in `art.types` only,
engines are a registry, and the torch engine takes its batch size from one place."""

from __future__ import annotations

import ast
import inspect
from pathlib import Path
from typing import get_args

import pytest
from helpers_source import SRC, code_strings, sources

from art.types import LOSS_FNS, EngineName, LossFn

TYPES = SRC / "types.py"
LEARNING_RATES = {
    "learning_rate",
    "peak_lr",
}  # a setting; not `lr=` of an optimizer built before a step sets it


def test_loss_names_are_spelled_in_types_only() -> None:
    """`"cispo"`, `"ppo"` as code: only art/types.py (the reference's `experimental_config.ppo` flag of
    `art serve`'s serverless routes is a key of its config, not the name of our loss; the Tinker API's loss
    table names its own losses)."""
    allowed = {
        ("hub/routes/serverless/training_jobs.py", "ppo"),
        ("training/reference_loss.py", "ppo"),  # the reference's `experimental_config["ppo"]` key, ported
        # the Tinker API's loss names (its wire protocol, a namespace of its own that shares two names):
        ("training/token_losses.py", "ppo"),
        ("training/token_losses.py", "cispo"),
    }
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


def test_one_list_of_engines_and_each_engine_starts_from_its_own_package() -> None:
    from art.common.engine_traits import ENGINE_TRAITS
    from art.engines.base import EngineKind
    from art.engines.factory import engine_kind

    assert tuple(ENGINE_TRAITS) == get_args(EngineName)
    for name, traits in ENGINE_TRAITS.items():
        assert traits.start_module == f"art.engines.{name}.start"
        assert isinstance(engine_kind(name), EngineKind)


ENGINE_TABLES = {"common/engine_traits.py"}  # ENGINE_TRAITS, the one list


def _engine_name_checks(tree: ast.AST, names: set[str]) -> list[ast.AST]:
    """Comparisons of an engine's name (`options.engine == "vllm"`, `engine in (...)`, `== "torch"`; `engine
    in ENGINE_TRAITS` asks the table) and the engine names spelled out as a list (a membership check by
    another name) or as the keys of a table: the nodes, in source order."""

    def is_name(node: ast.expr) -> bool:
        return isinstance(node, ast.Constant) and node.value in names

    def spelled(node: ast.expr) -> bool:
        return isinstance(node, ast.Tuple | ast.List | ast.Set) and any(is_name(e) for e in node.elts)

    def check(node: ast.AST) -> bool:
        if isinstance(node, ast.Compare):
            equality = any(isinstance(o, ast.Eq | ast.NotEq) for o in node.ops)
            return any(
                is_name(o)
                or spelled(o)
                or (equality and isinstance(o, ast.Name) and o.id == "engine")
                or (equality and isinstance(o, ast.Attribute) and o.attr == "engine")
                for o in [node.left, *node.comparators]
            )
        if isinstance(node, ast.Tuple | ast.List | ast.Set):
            return sum(map(is_name, node.elts)) >= 2
        return isinstance(node, ast.Dict) and any(k is not None and is_name(k) for k in node.keys)

    found = [node for node in ast.walk(tree) if check(node)]
    return sorted(found, key=lambda n: (getattr(n, "lineno", 0), getattr(n, "col_offset", 0)))


def test_no_code_compares_engine_names() -> None:
    """What differs by engine is a trait or the engine's own start module (`art.common.engine_traits.
    ENGINE_TRAITS`): no code outside that table compares an engine's name or spells the names out as a list,
    except the `EngineName` Literal beside it."""
    names = set(get_args(EngineName))
    stray = []
    for path in sources():
        relative = path.relative_to(SRC).as_posix()
        if relative in ENGINE_TABLES:
            continue
        tree = ast.parse(path.read_text())
        literal = {  # the names' owner: `EngineName = Literal["torch", "vllm"]`
            id(n)
            for a in ast.walk(tree)
            if isinstance(a, ast.Assign) and [ast.unparse(t) for t in a.targets] == ["EngineName"]
            for n in ast.walk(a.value)
        }
        stray += [
            f"{relative}:{getattr(n, 'lineno', 0)} {ast.unparse(n)}"
            for n in _engine_name_checks(tree, names)
            if id(n) not in literal
        ]
    assert stray == [], f"ask art.common.engine_traits.ENGINE_TRAITS instead of the engine's name: {stray}"


def test_the_engine_name_check_sees_an_if_chain() -> None:
    names = {"torch", "vllm"}
    code = (
        'if options.engine == "vllm": pass\n'
        'if engine not in ("torch", "vllm"): pass\n'
        'x = "torch" != kind\n'
        "y = engine is not other and engine in ENGINE_TRAITS and options.engine != VLLM\n"
        'z = {"torch": 1}\n'
    )
    found = [ast.unparse(n) for n in _engine_name_checks(ast.parse(code), names)]
    assert found == [
        "options.engine == 'vllm'",
        "engine not in ('torch', 'vllm')",
        "('torch', 'vllm')",
        "'torch' != kind",
        "options.engine != VLLM",
        "{'torch': 1}",
    ]


def test_the_torch_engine_takes_its_batch_limits_from_the_runtime_options() -> None:
    pytest.importorskip("torch")
    from art.engines.torch.torch_engine import TorchEngine

    for function in (TorchEngine.__init__, TorchEngine.from_pretrained):
        parameters = inspect.signature(function).parameters
        assert parameters["max_num_seqs"].default is None and parameters["max_model_len"].default is None
    from art.engines.torch import start

    assert "max_num_seqs" not in inspect.getsource(start.start_torch_engine)  # given once: in the options


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
