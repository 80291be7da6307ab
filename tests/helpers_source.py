"""Reading src/art as source for the tests that check its rules (one owner per setting, the ART_* table)."""

from __future__ import annotations

import ast
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src" / "art"


def sources() -> list[Path]:
    """Every module of src/art."""
    return sorted(p for p in SRC.rglob("*.py") if "__pycache__" not in p.parts)


def code_strings(tree: ast.AST) -> list[ast.Constant]:
    """The string constants of a parsed module's code: its docstrings (module, classes, functions) left out."""
    docs = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                docs.add(id(first.value))
    return [
        n
        for n in ast.walk(tree)
        if isinstance(n, ast.Constant) and isinstance(n.value, str) and id(n) not in docs
    ]
