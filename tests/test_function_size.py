"""No function of src/art over 80 lines of code unless its docstring says why (issue 54 item 5).

A function's size is the lines of its body that hold code: its signature and decorators, its docstring,
comments and blank lines do not count; nested functions and classes count with the function around them
(a closure-style factory is as long as everything in it). A function over the limit passes when its
docstring has the words "Long on purpose:" followed by the reason (a constructor mirroring the
reference's signature, a training step whose stages must stay in one order). Anything else is split into
named helpers, or its routes moved into modules of their own.
"""

from __future__ import annotations

import ast
import io
import textwrap
import tokenize
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src" / "art"
LIMIT = 80
REASON = "Long on purpose:"
_NOT_CODE = {
    tokenize.COMMENT,
    tokenize.NL,
    tokenize.NEWLINE,
    tokenize.INDENT,
    tokenize.DEDENT,
    tokenize.ENDMARKER,
}
Function = ast.FunctionDef | ast.AsyncFunctionDef


def _code_lines(source: str) -> set[int]:
    """The line numbers of `source` that hold at least one token of code (a line inside a multi-line string
    or bracket counts; a comment or blank line does not)."""
    lines: set[int] = set()
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type not in _NOT_CODE:
            lines.update(range(token.start[0], token.end[0] + 1))
    return lines


def _docstring_lines(function: Function) -> range:
    first = function.body[0]
    if (
        isinstance(first, ast.Expr)
        and isinstance(first.value, ast.Constant)
        and isinstance(first.value.value, str)
    ):
        return range(first.lineno, (first.end_lineno or first.lineno) + 1)
    return range(0)


def function_sizes(source: str) -> list[tuple[str, int, int, bool]]:
    """(qualified name, line, code lines of its body, whether its docstring gives the reason) for every
    function and method of `source`, nested ones included."""
    code = _code_lines(source)
    found: list[tuple[str, int, int, bool]] = []

    def visit(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, Function):
                name = f"{prefix}{child.name}"
                docstring = _docstring_lines(child)
                body = range(child.body[0].lineno, (child.end_lineno or child.lineno) + 1)
                size = sum(1 for line in body if line in code and line not in docstring)
                found.append((name, child.lineno, size, REASON in (ast.get_docstring(child) or "")))
                visit(child, f"{name}.")
            elif isinstance(child, ast.ClassDef):
                visit(child, f"{prefix}{child.name}.")
            else:
                visit(child, prefix)

    visit(ast.parse(source), "")
    return found


def too_long(source: str, limit: int = LIMIT) -> list[str]:
    """`name:line (N lines)` of each function of `source` over `limit` code lines without the reason."""
    return [
        f"{name}:{line} ({size} lines)"
        for name, line, size, reasoned in function_sizes(source)
        if size > limit and not reasoned
    ]


def test_no_function_of_src_art_is_long_without_a_reason() -> None:
    long = [
        f"{path.relative_to(SRC).as_posix()} {found}"
        for path in sorted(SRC.rglob("*.py"))
        for found in too_long(path.read_text(encoding="utf-8"))
    ]
    assert long == [], (
        f"functions over {LIMIT} lines of code: split them into named helpers, or say why in the "
        f"docstring, starting with {REASON!r}:\n" + "\n".join(long)
    )


def _synthetic(lines: int, docstring: str) -> str:
    body = "\n".join(
        f"    x{i} = {i}  # a comment" + ("\n\n    # only a comment" if i % 10 == 0 else "")
        for i in range(lines - 1)
    )
    return (
        textwrap.dedent(
            f'''
        import os


        def long_one(
            a: int,
            b: int,
        ) -> int:
            """{docstring}

            More words, which do not count.
            """
        '''
        )
        + body
        + "\n    return a + b\n\n\ndef short_one() -> None:\n    pass\n"
    )


def test_the_counter_counts_code_lines_of_the_body_only() -> None:
    sizes = {name: size for name, _, size, _ in function_sizes(_synthetic(90, "A function."))}
    assert sizes == {"long_one": 90, "short_one": 1}
    nested = "class C:\n    def m(self):\n        def inner():\n            return (\n                1,\n            )\n        return inner\n"
    assert [(n, s) for n, _, s, _ in function_sizes(nested)] == [("C.m", 5), ("C.m.inner", 3)]


def test_a_long_function_is_flagged_unless_its_docstring_says_why() -> None:
    assert too_long(_synthetic(90, "A function.")) == ["long_one:5 (90 lines)"]
    assert too_long(_synthetic(90, "A function. Long on purpose: its steps stay in one order.")) == []
    assert too_long(_synthetic(80, "A function.")) == []
