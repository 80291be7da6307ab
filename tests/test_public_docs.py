"""Every public name reads well in `help()`: a docstring whose first line says what it is, and an example.
(Every fenced python and bash block of README.md and docs/ runs as written: tests/test_docs_code.py.)

The list is built from the modules' `__all__` (or their public top-level functions and classes when they
have none), so a public name added without a documented example fails here. Constants and type aliases
(`DEFAULT_JUDGE`, `Messages`, ...) are skipped: `help()` of them shows their value's type, not ours.
"""

from __future__ import annotations

import doctest
import importlib
import importlib.util
import inspect
import re
import types
from pathlib import Path
from typing import Any

import pytest

import art

# module -> why it may be missing (its extra); None: always importable with the base install
MODULES: dict[str, str | None] = {
    "art": None,
    "art.utils": None,
    "art.utils.sft": None,
    "art.utils.output_dirs": None,
    "art.utils.get_repo_root_path": None,
    "art.rewards": None,
    "art.recipes.autorl": None,
    "art.recipes.ruler_loop": None,
    "art.integrations": None,
    "art.metrics": None,
    "art.metrics_taxonomy": None,
    "art.errors": None,
    "art.cli.checks": None,
    "art.common.waits": None,
    "art.dev.validate": None,
    "art.guided_completion": None,
    "art.utils.logging": None,
    "art.api_costs": None,
    "art.costs": None,
    "art.record.plots": "matplotlib",
    "art.utils.benchmarking.types": None,
    "art.utils.benchmarking.load_trajectories": "polars",
    "art.utils.benchmarking.filter_model_split": "polars",
    "art.utils.benchmarking.aggregate_trajectories": "polars",
    "art.utils.benchmarking.charts": "polars",
    "art.utils.benchmarking.log_constant_metrics_wandb": None,
    "art.utils.benchmarking.pull_model_trajectories": None,
    "art.langgraph": "langchain_openai",
    "art.mcp": "mcp",
    "art.ray": "ray",
}

# art.record.storage is internal but for its read_* helpers, which users call to read a run's record
STORAGE_READERS = ("read_jsonl", "read_history_file", "read_groups_file", "read_trajectories")

# the methods users call on the main classes (attribute path from `art`)
METHODS = (
    "Model.register",
    "Model.openai_client",
    "Model.get_inference_name",
    "Model.log",
    "Model.metrics_builder",
    "Model.activate_metrics_context",
    "TrainableModel.set_cost_calculator",
    "Model.history",
    "TrainableModel.train",
    "TrainableModel.train_sft",
    "TrainableModel.delete_checkpoints",
    "Backend.train",
    "LocalBackend",
    "RemoteBackend",
    "TrajectoryGroup",
    "Trajectory",
    "gather_trajectory_groups",
    "iterate_dataset",
    "retry",
    "rewards.ruler_score_group",
)


def _documentable(obj: Any) -> bool:
    """A class or function of ours (not a constant, type alias or re-exported foreign object)."""
    if not (inspect.isclass(obj) or inspect.isroutine(obj)):
        return False
    return getattr(obj, "__module__", "").startswith("art")


def _public_names(module: types.ModuleType) -> list[str]:
    names = getattr(module, "__all__", None)
    if names is not None:
        return list(names)
    return [
        name
        for name, value in vars(module).items()
        if not name.startswith("_") and getattr(value, "__module__", None) == module.__name__
    ]


def _module(name: str) -> types.ModuleType:
    extra = MODULES[name]
    if extra is not None:
        pytest.importorskip(extra, reason=f"{name} needs its optional dependency {extra}")
    return importlib.import_module(name)


def _targets() -> list[Any]:
    params = []
    for module_name, extra in MODULES.items():
        if extra is not None and importlib.util.find_spec(extra) is None:
            params.append(pytest.param(module_name, None, id=f"{module_name}(needs {extra})"))
            continue  # the case skips, saying which extra is missing
        module = importlib.import_module(module_name)
        for name in sorted(set(_public_names(module))):
            if _documentable(getattr(module, name)):
                params.append(pytest.param(module_name, name, id=f"{module_name}.{name}"))
    params += [
        pytest.param("art.record.storage", name, id=f"art.record.storage.{name}") for name in STORAGE_READERS
    ]
    return params


def _assert_documented(obj: Any, label: str) -> None:
    doc = inspect.getdoc(obj) or ""
    first = doc.strip().splitlines()[0] if doc.strip() else ""
    assert first and not first.startswith(("Example", ">>>")), f"{label} has no one-line summary first"
    assert "Example" in doc or ">>>" in doc, f"{label}'s docstring has no example: add an `Example:` section"


@pytest.mark.parametrize(("module_name", "name"), _targets())
def test_public_name_has_a_summary_and_an_example(module_name: str, name: str | None) -> None:
    # `_module` skips, naming the extra, when the module's optional dependency is missing
    module = _module(module_name) if module_name in MODULES else importlib.import_module(module_name)
    assert name is not None
    _assert_documented(getattr(module, name), f"{module_name}.{name}")


def test_the_name_filter_keeps_the_public_api() -> None:
    """Guard against `_documentable` silently dropping everything (the test above would then pass)."""
    names = {name for _, name in (p.values for p in _targets())}
    assert {
        "TrainableModel",
        "Trajectory",
        "gather_trajectory_groups",
        "ruler_score_group",
        "rescore",
    } <= names
    assert "DEFAULT_JUDGE" not in names and "Messages" not in names


@pytest.mark.parametrize("path", METHODS)
def test_main_methods_have_an_example(path: str) -> None:
    obj: Any = art
    for part in path.split("."):
        obj = getattr(obj, part)
    _assert_documented(obj, f"art.{path}")


def _doctests() -> list[Any]:
    """One case per docstring of the public API (methods of its classes included) with a `>>>` example that
    runs: the ones with none are not collected, so no case passes without running anything. Docstrings
    whose every example is marked `# doctest: +SKIP` are illustrations, like the docs' marked blocks."""
    params, seen = [], set()
    for target in _targets():
        module_name, name = target.values
        if name is None:  # the module's extra is missing: its case skips, saying which
            why = f"{target.id}: its examples need that optional dependency"
            params.append(pytest.param(None, id=target.id, marks=pytest.mark.skip(reason=why)))
            continue
        module = importlib.import_module(module_name)
        globs = {"art": art, **vars(module)}
        for test in doctest.DocTestFinder(recurse=True).find(getattr(module, name), name, globs=globs):
            where = (test.filename, test.lineno, test.name)
            if where in seen or not _runnable(test):
                continue  # one object reached by two names (`art.X` and `art.module.X`) runs once
            seen.add(where)
            params.append(pytest.param(test, id=f"{module_name}.{test.name}"))
    return params


def _runnable(test: doctest.DocTest) -> int:
    """How many of `test`'s examples run (those not marked `+SKIP`)."""
    return sum(not ex.options.get(doctest.SKIP, False) for ex in test.examples)


DOCTESTS = _doctests()


@pytest.mark.parametrize("test", DOCTESTS)
def test_doctest_examples_run(test: doctest.DocTest | None) -> None:
    """`>>>` promises a runnable example: each one runs here (without a model or server) and gives its output."""
    assert test is not None  # (None: a skipped case, for a missing extra)
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS)
    runner.run(test)
    assert runner.tries == _runnable(test) > 0, f"{test.name}: ran {runner.tries} example(s)"
    assert runner.failures == 0, f"{test.name}: {runner.failures} doctest example(s) failed (see stdout)"


def test_every_public_docstring_with_a_prompt_is_run() -> None:
    """Guard against the collection above dropping examples (the test above would then pass with fewer
    cases): every `>>>` line of a public docstring that is not marked `+SKIP` belongs to a collected case,
    counted here from the raw docstrings, not by doctest's parser; and the best-known examples are there."""
    collected = {p.values[0].name for p in DOCTESTS if p.values[0] is not None}
    for target in _targets():
        module_name, name = target.values
        if name is None:
            continue
        obj = getattr(importlib.import_module(module_name), name)
        members = [(name, obj)]
        if inspect.isclass(obj):
            members += [
                (f"{name}.{attr}", value)
                for attr, value in vars(obj).items()
                if getattr(inspect.unwrap(getattr(value, "__func__", value)), "__module__", None)
                == obj.__module__
            ]
        for label, member in members:
            doc = getattr(member, "__doc__", None) or ""
            prompts = [line for line in doc.splitlines() if line.lstrip().startswith(">>> ")]
            if any("doctest: +SKIP" not in line for line in prompts):
                assert label in collected, f"{module_name}.{label} has a `>>>` example that no case runs"
    assert {
        "Trajectory",
        "TrajectoryGroup",
        "iterate_dataset",
        "retry",
        "Model.get_inference_name",
    } <= collected, sorted(collected)
    assert len(collected) >= 80, f"only {len(collected)} docstrings with examples collected"


def test_help_of_trainable_model_starts_with_our_docstring() -> None:
    import pydoc

    text = pydoc.render_doc(art.TrainableModel, renderer=pydoc.plaintext)
    own = (inspect.getdoc(art.TrainableModel) or "").splitlines()[0]
    head = [line.strip(" |") for line in text.splitlines()[:8]]
    assert own in head, head
    assert "Example:" in text and "__pydantic" not in text


# ---- the install commands of README.md and docs/ (their blocks run in tests/test_docs_code.py) -----------
REPO = Path(__file__).resolve().parents[1]
PAGES = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]


def test_install_commands_name_the_project_and_extras_that_exist() -> None:
    import tomllib

    extras = set(tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["optional-dependencies"])
    text = "\n".join(page.read_text(encoding="utf-8") for page in PAGES)
    assert "agent-reinforcement-trainer[" not in text  # not on PyPI: install from the checkout
    named = re.findall(r'pip install -e "\.\[([a-z,-]+)\]"', text)
    assert len(named) >= 8, named
    for group in named:
        assert set(group.split(",")) <= extras, group
