"""Give every ``assert`` that compares values in the chapters a message with what it got.

A hidden check that fails in a reader's kernel (another CPU, another seed) must say what it
checked and what it got, not raise a bare ``AssertionError``. This rewrites
``assert lo <= x < hi`` as ``assert lo <= x < hi, f"got {x=}"``: the traceback shows the
line, the message the values it compared (those that are not literals). Run it after writing new
checks; ``tests/test_notebooks.py`` fails on an assert without a message.

    python book/tools/assert_messages.py [--check] [notebook.ipynb ...]
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import nbformat

ROOT = Path(__file__).resolve().parents[2]


def _magic_free(source: str) -> str:
    """The cell with IPython magics and shell lines blanked (same line numbers)."""
    return "\n".join(
        "" if line.lstrip().startswith(("%", "!")) else line for line in source.split("\n")
    )


def _compares(test: ast.expr) -> list[ast.Compare]:
    """The comparisons an assert's test is made of (through and/or/not), top level only."""
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        return _compares(test.operand)
    if isinstance(test, ast.BoolOp):
        return [c for v in test.values for c in _compares(v)]
    return [test] if isinstance(test, ast.Compare) else []


def shown(test: ast.expr) -> list[str]:
    """Source text of the values a message shows: the compared operands that are not
    literals, each once, in order."""
    out = []
    for cmp in _compares(test):
        for part in (cmp.left, *cmp.comparators):
            literal = isinstance(part, ast.Constant) or (
                isinstance(part, (ast.Tuple, ast.List, ast.Set, ast.Dict))
                and all(
                    isinstance(e, ast.Constant)
                    for e in ast.walk(part)
                    if isinstance(e, ast.expr) and e is not part
                )
            )
            text = ast.unparse(part)
            named = any(isinstance(n, ast.Name) for n in ast.walk(part))
            printable = len(text) <= 80 and not any(c in text for c in '"\\{}\n')
            if named and not literal and printable and text not in out:
                out.append(text)
    return out


def needs_message(node: ast.Assert) -> bool:
    """An assert that compares computed values must say what it got."""
    return node.msg is None and bool(shown(node.test))


def asserts_needing_message(source: str) -> list[ast.Assert]:
    try:
        tree = ast.parse(_magic_free(source))
    except SyntaxError:
        return []
    return [n for n in ast.walk(tree) if isinstance(n, ast.Assert) and needs_message(n)]


def message(test: ast.expr) -> str:
    """Python source of the message: an f-string of self-documenting fields, e.g.
    ``f"got {accuracy['previous']=}"``, which prints ``got accuracy['previous']=0.965``."""
    return 'f"got ' + ", ".join("{" + s + "=}" for s in shown(test)) + '"'


def rewrite(source: str) -> str:
    lines = source.split("\n")
    # Insert from the end so earlier positions stay valid.
    for node in sorted(
        asserts_needing_message(source),
        key=lambda n: (n.end_lineno, n.end_col_offset),
        reverse=True,
    ):
        row, col = node.end_lineno - 1, node.end_col_offset
        line = lines[row]
        lines[row] = line[:col] + ", " + message(node.test) + line[col:]
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    check = "--check" in argv
    paths = [Path(a) for a in argv if a != "--check"] or [
        *sorted((ROOT / "chapters").glob("*.ipynb")),
        ROOT / "book" / "intro.ipynb",
    ]
    missing = 0
    for path in paths:
        nb = nbformat.read(path, as_version=4)
        changed = 0
        for cell in nb.cells:
            if cell.cell_type != "code":
                continue
            found = asserts_needing_message(cell.source)
            if not found:
                continue
            missing += len(found)
            if not check:
                new = rewrite(cell.source)
                ast.parse(_magic_free(new))  # still valid Python
                cell.source = new
                changed += len(found)
        if changed:
            nbformat.write(nb, path)
            print(f"{path.name}: {changed} assert(s) given a message")
    if check and missing:
        print(
            f"{missing} comparing assert(s) without a message: run python book/tools/assert_messages.py"
        )
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
