"""The arrows of DESIGN.md section 2 hold: the client imports no torch, training imports no engine, the
shared rooms (chat, kernels, base_model) import nothing above them. Checked in fresh interpreters, so what
other tests imported cannot hide an import."""

from __future__ import annotations

import ast
import functools
import json
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest


@functools.cache
def _modules_after(code: str) -> frozenset[str]:
    script = f"{code}\nimport sys, json\nprint(json.dumps(sorted(sys.modules)))"
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    return frozenset(json.loads(done.stdout.strip().splitlines()[-1]))


def _ours(modules: frozenset[str], package: str) -> list[str]:
    return sorted(m for m in modules if m == package or m.startswith(package + "."))


def _beyond_art(code: str) -> frozenset[str]:
    """Modules `code` imports beyond what `import art` itself loads (its light public face)."""
    return _modules_after(code) - _modules_after("import art")


def test_import_art_stays_light() -> None:
    modules = _modules_after("import art; art.Trajectory; art.TrainableModel; art.RuntimeOptions")
    heavy = [m for m in ("torch", "transformers", "fastapi", "uvicorn", "peft") if m in modules]
    assert heavy == [], f"`import art` loaded {heavy}"
    assert _ours(modules, "art.engines") == [] and _ours(modules, "art.training") == []


def test_the_remote_client_stays_light() -> None:
    """`RemoteBackend` (both import paths) and the wire shapes it shares with `art serve`: no torch, no web
    framework, nothing of the service."""
    modules = _modules_after(
        "import art; art.RemoteBackend; from art.remote import RemoteBackend; import art.backends.remote_protocol"
    )
    assert "art.backends.remote" in modules and "httpx" in modules
    heavy = [m for m in ("torch", "transformers", "fastapi", "uvicorn", "peft", "starlette") if m in modules]
    assert heavy == [], f"the remote client loaded {heavy}"
    for below in (
        "art.service",
        "art.engines",
        "art.training",
        "art.hub.api",
        "art.hub.models",
        "art.hub.jobs",
    ):
        assert _ours(modules, below) == [], _ours(modules, below)


def test_the_tinker_backend_stays_light_until_used() -> None:
    """`art.TinkerBackend` loads the tinker SDK (which imports torch) at its first registration, not before."""
    modules = _modules_after("import art; art.TinkerBackend")
    assert "art.backends.tinker" in modules
    heavy = [
        m for m in ("torch", "tinker", "transformers", "fastapi", "art.backends.tinker_run") if m in modules
    ]
    assert heavy == [], f"art.TinkerBackend loaded {heavy}"


def test_training_imports_no_engine() -> None:
    pytest.importorskip("torch")
    modules = _beyond_art(
        "import art.training.trainer, art.training.tokenize, art.training.logprobs, art.training.fast_decoder"
    )
    assert "art.training.trainer" in modules
    assert _ours(modules, "art.engines") == [], "training imported an engine module"
    assert _ours(modules, "art.service") == [] and _ours(modules, "art.backends") == []


def test_shared_rooms_import_nothing_above_them() -> None:
    """Every module of chat, kernels and base_model, imported together (one interpreter: if none of them
    reaches above, neither does any one of them)."""
    pytest.importorskip("torch")
    import importlib
    import pkgutil

    names = [
        f"{package}.{m.name}"
        for package in ("art.chat", "art.kernels", "art.base_model")
        for m in pkgutil.iter_modules(importlib.import_module(package).__path__)
    ]
    assert len(names) >= 9, names
    modules = _beyond_art("; ".join(f"import {n}" for n in names))
    for above in ("art.engines", "art.training", "art.service", "art.backends"):
        assert _ours(modules, above) == [], f"the shared rooms imported {_ours(modules, above)}"


def test_the_service_depends_on_the_engine_protocol_not_the_torch_engine() -> None:
    pytest.importorskip("torch")
    modules = _modules_after(
        "import art.service.service, art.openai_server.http, art.openai_server.chat_completions"
    )
    assert "art.service.service" in modules
    assert _ours(modules, "art.engines.torch") == [], _ours(modules, "art.engines.torch")


# ---- the static check: every import statement of src/art, wherever it stands ---------------------------
# The rooms of docs/design.md section 2, lowest first, grouped in floors. A module may import its own room and
# any room on a LOWER level; rooms on one level import nothing of each other. The top level (the public face
# `art`, the `python -m art` entry and the reference's paths kept as shims) may import anything and nothing
# imports it. No exception for annotations: an import under `if TYPE_CHECKING:` runs down the levels too.
LEVELS: tuple[tuple[str, ...], ...] = (
    # the floor, no torch: settings and errors, the core data, metrics, the record on disk, the core settings
    ("common",),
    ("trajectories",),
    ("metrics",),
    ("record",),
    ("types",),
    # what both sides share: the client's rollout helpers and rewards; the heavy side's chat, kernels, models
    ("rollout", "rewards", "chat", "kernels", "base_model", "dev"),
    # test and benchmark helpers: tiny models, other hosts' kernels (which reach base_model and kernels)
    ("testing",),
    # the heavy side: engines and the trainer, scale-out over them, the step lifecycle and the HTTP front
    ("training", "engines"),
    ("cluster",),
    ("service", "openai_server"),
    # the client side: trackers, the model (which defines the Backend protocol it talks through), backends
    ("integrations",),
    ("model",),
    ("backends",),
    # the reference's art.utils; clients of environments that run elsewhere (tau-bench); `art ui`'s pages
    ("utils", "environments", "ui"),
    # the hub (`art serve`, which mounts the ui's pages), then the apps
    ("hub",),
    ("recipes",),  # pipeline trainer, the RULER loop, AutoRL, MCP-RL
    ("cli",),  # the `art` command
)
TOP = len(LEVELS)
# The example tasks (examples/, installed as `art.examples`) are user code, above the house; the one room
# that imports them is the `art` command, whose `art demo` runs the tic-tac-toe example.
EXAMPLE_USERS = {"cli"}
REPO = Path(__file__).resolve().parents[1]
SRC = REPO / "src" / "art"


@dataclass(frozen=True)
class _Import:
    source: str  # the importing module, dotted
    target: str  # the imported module (the longest dotted prefix that is one of ours)
    line: int
    type_only: bool  # under `if TYPE_CHECKING:`
    where: str  # "module" or the enclosing function's name


def _module_names(*, with_examples: bool = False) -> dict[str, Path]:
    names = {}
    roots = [(SRC, ["art"])] + ([(REPO / "examples", ["art", "examples"])] if with_examples else [])
    for root, prefix in roots:
        for path in root.rglob("*.py"):
            parts = [*prefix, *path.relative_to(root).with_suffix("").parts]
            if parts[-1] == "__init__":
                parts.pop()
            names[".".join(parts)] = path
    return names


def _resolve(name: str, modules: dict[str, Path]) -> str:
    while name and name not in modules:
        name = name.rpartition(".")[0]
    return name


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _imports_of(name: str, path: Path, modules: dict[str, Path]) -> list[_Import]:
    """Every `import`/`from ... import` (and `importlib.import_module("literal")`) in the file: at module
    level, inside functions, under `if TYPE_CHECKING:`, in `try:` blocks."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: list[_Import] = []

    def visit(node: ast.AST, type_only: bool, where: str) -> None:
        targets: list[str] = []
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, *([node.module] if node.module else [])])
            targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in modules else base for a in node.names]
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute | ast.Name)
            and (node.func.attr if isinstance(node.func, ast.Attribute) else node.func.id) == "import_module"
            and node.args
            and isinstance(node.args[0], ast.Constant)
            and isinstance(node.args[0].value, str)
            and not node.args[0].value.startswith(".")
        ):
            targets = [node.args[0].value]
        for target in targets:
            if target == "art" or target.startswith("art."):
                resolved = _resolve(target, modules)
                if resolved != name:
                    found.append(_Import(name, resolved, getattr(node, "lineno", 0), type_only, where))
        for field, value in ast.iter_fields(node):
            children = value if isinstance(value, list) else [value]
            for child in children:
                if not isinstance(child, ast.AST):
                    continue
                inner_type_only = type_only or (
                    isinstance(node, ast.If) and _is_type_checking(node.test) and field == "body"
                )
                inner_where = (
                    child.name if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef) else where
                )
                visit(child, inner_type_only, inner_where)

    visit(ast.parse(path.read_text(), str(path)), False, "module")
    return found


@functools.cache
def _all_imports() -> tuple[_Import, ...]:
    modules, known = _module_names(), _module_names(with_examples=True)
    return tuple(i for name, path in sorted(modules.items()) for i in _imports_of(name, path, known))


_SHIM_CALLS = {"import_module", "update"}  # importlib.import_module(...), globals().update(...)


def is_shim(path: Path) -> bool:
    """A module that only points at the one where the code lives: imports, `__all__`, `sys.modules[__name__]
    = ...`, `globals().update(...)`, a `for` loop importing submodules, an `if TYPE_CHECKING:` block, a
    module `__getattr__` that forwards (or `art.common.aliases.alias_package`'s), and the reference's optional `torch` attribute (for patching)."""

    def plain(stmt: ast.stmt) -> bool:
        if isinstance(stmt, ast.Import | ast.ImportFrom):
            return True
        if isinstance(stmt, ast.Expr):
            value = stmt.value
            if isinstance(value, ast.Constant) and isinstance(value.value, str):
                return True  # a docstring
            return (
                isinstance(value, ast.Call)
                and isinstance(value.func, ast.Attribute)
                and value.func.attr in _SHIM_CALLS
            )
        if isinstance(stmt, ast.Assign):
            target = stmt.targets[0]
            if isinstance(target, ast.Name):
                if target.id == "__getattr__":  # art.common.aliases.alias_package(__name__, ...)
                    return (
                        isinstance(stmt.value, ast.Call) and ast.unparse(stmt.value.func) == "alias_package"
                    )
                return target.id == "__all__" or (
                    target.id == "torch" and isinstance(stmt.value, ast.Constant) and stmt.value.value is None
                )
            return isinstance(target, ast.Subscript) and ast.unparse(target) == "sys.modules[__name__]"
        if isinstance(stmt, ast.AnnAssign):
            return ast.unparse(stmt.target) == "torch" and stmt.value is None
        if isinstance(stmt, ast.If):
            return _is_type_checking(stmt.test) and all(plain(s) for s in stmt.body + stmt.orelse)
        if isinstance(stmt, ast.Try):
            return all(plain(s) for s in stmt.body) and all(plain(s) for h in stmt.handlers for s in h.body)
        if isinstance(stmt, ast.For):
            return all(plain(s) for s in stmt.body) and not stmt.orelse
        if isinstance(stmt, ast.FunctionDef) and stmt.name == "__getattr__":
            return len(stmt.body) == 1 and isinstance(stmt.body[0], ast.Return)
        return False

    return all(plain(s) for s in ast.parse(path.read_text()).body)


def _room(module: str) -> str:
    """The room a module lives in: `art.engines.torch.sampling` -> "engines"; the public face -> "art"."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "art"


def _level(module: str, shims: frozenset[str]) -> int:
    room = _room(module)
    if module in shims or room in ("art", "__main__", "examples"):
        return TOP
    for level, rooms in enumerate(LEVELS):
        if room in rooms:
            return level
    raise AssertionError(
        f"{module}: the room {room!r} is on no level of LEVELS; place it (and in docs/design.md)"
    )


@functools.cache
def _shims() -> frozenset[str]:
    """Modules that only point at another room (a room's own `__init__` re-exporting its modules is not one)."""
    modules = _module_names()
    imports: dict[str, set[str]] = {}
    for i in _all_imports():
        imports.setdefault(i.source, set()).add(_room(i.target))
    return frozenset(
        name for name, path in modules.items() if is_shim(path) and imports.get(name, set()) - {_room(name)}
    )


def test_the_static_check_sees_imports_wherever_they_stand() -> None:
    """The walk finds imports inside functions and under TYPE_CHECKING, not only at the top of a file."""
    imports = _all_imports()
    assert len(imports) > 500, len(imports)
    assert any(i.where != "module" for i in imports) and any(i.type_only for i in imports)
    assert any(
        i.source == "art.hub.app" and i.target == "art.hub.api" and i.where == "build_app" for i in imports
    )


def test_every_import_runs_down_the_levels_of_the_house() -> None:
    shims = _shims()
    wrong = []
    for i in _all_imports():
        src_room, dst_room = _room(i.source), _room(i.target)
        if src_room == dst_room and i.source not in shims and i.target not in shims:
            continue
        src, dst = _level(i.source, shims), _level(i.target, shims)
        if dst < src or (src == TOP and i.source in shims | {"art", "art.__main__"}):
            if dst == TOP and i.source not in shims and _room(i.source) != "art":
                wrong.append(f"{i.source}:{i.line} ({i.where}) imports {i.target}, a shim or the public face")
            continue
        if dst_room == "examples" and src_room in EXAMPLE_USERS:
            continue
        wrong.append(f"{i.source}:{i.line} ({i.where}) imports {i.target}: {src_room} -> {dst_room} runs up")
    assert wrong == [], "\n".join(wrong)


def test_no_import_cycles_between_modules() -> None:
    """Modules (inside a room too) import each other one way only: no cycle through any import, at the top of
    a file, inside a function or under `if TYPE_CHECKING:` (a cycle closed by an annotation is still one).
    Shims are left out: they only point at where the code lives."""
    shims = _shims() | {"art", "art.__main__"}
    graph: dict[str, set[str]] = {}
    for i in _all_imports():
        if i.source not in shims and i.target not in shims:
            graph.setdefault(i.source, set()).add(i.target)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    cycles: list[list[str]] = []

    def strong(v: str) -> None:  # Tarjan's strongly connected components
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in graph.get(v, ()):
            if w not in index:
                strong(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                cycles.append(sorted(component))

    for v in list(graph):
        if v not in index:
            strong(v)
    assert cycles == [], cycles


def test_the_house_holds_no_loose_module() -> None:
    """src/art/ holds only the core data modules, the public face and shims of the reference's paths; a
    package kept only for the reference's path holds shims only."""
    core = {"__init__.py", "__main__.py", "trajectories.py", "types.py", "model.py"}
    loose = [p.name for p in SRC.glob("*.py") if p.name not in core and not is_shim(p)]
    assert loose == [], (
        f"{loose}: give each a room (a package under src/art/) and leave a shim if the reference has the path"
    )
    for package in ("langgraph", "mcp", "pipeline_trainer", "serverless", "tau_bench", "local"):
        not_shims = [p.name for p in (SRC / package).glob("*.py") if not is_shim(p)]
        assert not_shims == [], f"art.{package} is the reference's path only; move {not_shims} to their room"
    assert len([p for p in SRC.glob("*.py") if is_shim(p)]) >= 10  # the predicate recognises the shims


def test_the_shim_check_refuses_real_code(tmp_path: Path) -> None:
    shim = tmp_path / "shim.py"
    shim.write_text(
        '"""x"""\nimport importlib\nimport sys\n\nsys.modules[__name__] = importlib.import_module("art.record.storage")\n'
    )
    real = tmp_path / "real.py"
    real.write_text(
        '"""x"""\nfrom art.record.storage import validate_name\n\n\ndef check(n):\n    return validate_name(n)\n'
    )
    assert is_shim(shim) and not is_shim(real)


def test_the_readme_map_names_every_room() -> None:
    """README's "What is where" names every package that holds code of its own (shim packages need no row)."""
    readme = (SRC.parents[1] / "README.md").read_text()
    table = readme.split("## What is where", 1)[1].split("\n## ", 1)[0]
    rooms = [
        d.name
        for d in sorted(SRC.iterdir())
        if d.is_dir() and (d / "__init__.py").exists() and any(not is_shim(p) for p in d.rglob("*.py"))
    ]
    assert len(rooms) >= 15, rooms
    missing = [r for r in rooms if f"`{r}/`" not in table and f"`src/art/{r}/`" not in table]
    assert missing == [], f"{missing}: give each a row in README's 'What is where'"


# Every shim of src/art and the path it keeps: the reference's (openpipe-art 0.5.18 or 0.5.23, listed in
# tests/compat/reference_modules.txt) or one of the project's own documented public paths.
OWN_PUBLIC_PATHS = {
    "art.ray": "RayBackend (docs/scale.md)",
    "art.remote": "RemoteBackend (docs/remote.md)",
}
REFERENCE_MODULES = frozenset((REPO / "tests" / "compat" / "reference_modules.txt").read_text().split())


def test_every_shim_keeps_the_references_path_or_a_documented_one_of_ours() -> None:
    shims = _shims()
    assert len(shims) >= 20, sorted(shims)  # the predicate finds them
    stray = sorted(s for s in shims if s not in REFERENCE_MODULES and s not in OWN_PUBLIC_PATHS)
    assert stray == [], (
        f"{stray}: a shim keeps a path that neither the reference nor OWN_PUBLIC_PATHS has; import the "
        "module where the code lives instead, and delete the shim"
    )
    design = (REPO / "docs" / "design.md").read_text()
    unlisted = sorted(s for s in shims if f"`{s}`" not in design)
    assert unlisted == [], f"{unlisted}: list each shim and the module it points at in docs/design.md"


def test_the_shim_list_check_refuses_a_path_of_our_own() -> None:
    assert "art.plotting" not in REFERENCE_MODULES and "art.plotting" not in OWN_PUBLIC_PATHS
    assert "art.gather" in REFERENCE_MODULES and "art.local" in REFERENCE_MODULES
