"""One owner per environment variable: every `ART_*` name is in `art.common.env.ENV_VARS`, only that module
reads them (click reads the `envvar=` options of the `art` command, at its top), and library code leaves
the environment as it found it."""

from __future__ import annotations

import ast
import os
import re
import subprocess
import sys

import pytest
from helpers_source import SRC, code_strings, sources

from art.common.env import ENV_VARS, read
from art.types import ENV_OVERRIDES, RuntimeOptions

TABLE = SRC / "common" / "env.py"


def test_every_art_variable_named_anywhere_is_in_the_table() -> None:
    named = {
        (m, p.relative_to(SRC).as_posix())
        for p in sources()
        for m in re.findall(r"\bART_[A-Z0-9_]+", p.read_text())
    }
    assert len(named) > 20  # the scan found the names
    missing = sorted(f"{name} ({where})" for name, where in named if name not in ENV_VARS)
    assert missing == [], f"add these to art.common.env.ENV_VARS: {missing}"


def test_only_the_table_reads_art_variables() -> None:
    """A literal `ART_*` name in code (not in a docstring) appears in the table's module only, as the name
    given to `read_env` (the table's reader, which refuses names not in it), or as the `envvar=` of an `art`
    command option (click reads it when the command starts)."""
    stray = []
    for path in sources():
        if path == TABLE:
            continue
        tree = ast.parse(path.read_text())
        calls = [node for node in ast.walk(tree) if isinstance(node, ast.Call)]
        allowed = {id(k.value) for node in calls for k in node.keywords if k.arg == "envvar"} | {
            id(node.args[0])
            for node in calls
            if ast.unparse(node.func) in ("read_env", "env.read") and node.args
        }
        for node in code_strings(tree):
            if re.fullmatch(r"ART_[A-Z0-9_]+", node.value) and id(node) not in allowed:
                stray.append(f"{path.relative_to(SRC)}:{node.lineno} {node.value}")
    assert stray == [], f"read these through art.common.env.read (and name them there): {stray}"


def test_library_code_never_writes_the_environment() -> None:
    """No assignment, setdefault, update, pop or putenv on the process environment, anywhere in src/art,
    except the two owners that must: `offline_litellm` (set for LiteLLM's import alone and removed after,
    tested below) and `kernels.cpu_env` (oneDNN and ideep read their cache sizes from the environment only:
    set when an engine or trainer is made, never at import, a user's value wins, `RuntimeOptions.
    cpu_primitive_cache=None` turns it off; tests/kernels/test_cpu_env.py)."""
    owners = {SRC / "common" / "offline_litellm.py", SRC / "kernels" / "cpu_env.py"}
    writes = []
    for path in sources():
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            target = None
            if isinstance(node, ast.Assign | ast.AugAssign | ast.Delete):
                targets = node.targets if isinstance(node, ast.Assign | ast.Delete) else [node.target]
                target = next((t for t in targets if "environ" in ast.unparse(t)), None)
            elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
                text = ast.unparse(node.func)
                if text == "os.putenv" or (
                    "environ" in ast.unparse(node.func.value)
                    and node.func.attr in ("setdefault", "update", "pop", "clear", "popitem", "__setitem__")
                ):
                    target = node.func
            if target is not None and path not in owners:
                writes.append(f"{path.relative_to(SRC)}:{node.lineno} {ast.unparse(target)}")
    assert writes == [], writes


def test_litellm_is_imported_offline_and_the_environment_is_left_as_it_was() -> None:
    pytest.importorskip("litellm")
    script = (
        "import os\n"
        "from art.common.offline_litellm import import_litellm\n"
        "litellm = import_litellm()\n"
        "from litellm.litellm_core_utils import get_model_cost_map as g\n"
        "print(g._cost_map_source_info.source, 'LITELLM_LOCAL_MODEL_COST_MAP' in os.environ)\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "LITELLM_LOCAL_MODEL_COST_MAP"}
    done = subprocess.run(
        [sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split()[-2:] == ["local", "False"], done.stdout


def test_read_refuses_a_name_missing_from_the_table_and_strips_values() -> None:
    with pytest.raises(KeyError, match="ENV_VARS"):
        read("ART_NOT_A_SETTING", {})
    assert read("ART_DEBUG", {"ART_DEBUG": "  "}) is None
    assert read("ART_DEBUG", {"ART_DEBUG": " 1 "}) == "1"


def test_the_runtime_option_overrides_come_from_the_table() -> None:
    options = {v.name: v.runtime_option for v in ENV_VARS.values() if v.runtime_option}
    assert {name: field for name, (field, _) in ENV_OVERRIDES.items()} == options
    assert set(options.values()) <= set(RuntimeOptions.model_fields)
    assert RuntimeOptions().with_env_overrides({"ART_ENGINE_COMPILE": "0"}).engine_compile == "off"
