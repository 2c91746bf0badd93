"""Sphinx extension: a notebook the book cannot show properly fails the build, by name.

Run on each notebook's raw text when Sphinx reads it (``source-read``, before the other
handlers), two checks whose failure would otherwise pass unnoticed or unexplained:

1. **Invalid JSON** (a missing comma, a merge conflict): one error naming the file, line and
   column, in place of a long traceback from whichever handler parsed it first. The page is
   built empty, so the rest of the build still reports its own problems.
2. **A live figure without saved widget state**: an output that shows a widget whose model is
   not in the notebook's saved widget state renders as nothing in the static page (what a
   notebook saved from JupyterLab after *Run All* holds). One warning per figure, naming the
   notebook, the cell and the model; the book builds with ``-W``, so the build fails.
3. **Broken LaTeX** in a Markdown cell (or a Markdown page): a ``$`` that opens maths and
   never closes, and inside ``$...$`` or ``$$...$$`` unbalanced braces, ``\\left`` without
   ``\\right`` or ``\\begin`` without ``\\end``, which MathJax would show as an error in
   the page. A warning naming the page, the cell and the formula.

Loaded by ``plain_links`` (``app.setup_extension``), so ``_config.yml`` needs no entry.
"""

from __future__ import annotations

import json
import re

from sphinx.application import Sphinx
from sphinx.util import logging

logger = logging.getLogger(__name__)
WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
WIDGET_STATE = "application/vnd.jupyter.widget-state+json"
CODE = re.compile(r"```.*?```|~~~.*?~~~|`[^`\n]*`", re.S)
MATH = re.compile(r"\$\$(.+?)\$\$|\$([^$]+?)\$", re.S)
EMPTY_NOTEBOOK = json.dumps(
    {"cells": [], "metadata": {}, "nbformat": 4, "nbformat_minor": 5}, ensure_ascii=False
)


def invalid_json(text: str) -> str | None:
    """Why ``text`` is not a notebook's JSON (message, line, column), or None if it parses."""
    try:
        nb = json.loads(text)
    except json.JSONDecodeError as error:
        return f"{error.msg} at line {error.lineno}, column {error.colno}"
    if not isinstance(nb, dict) or not isinstance(nb.get("cells"), list):
        return "not a notebook (no list of cells)"
    return None


def views_without_state(nb: dict) -> list[str]:
    """One line for each widget view in ``nb``'s outputs whose model has no saved state."""
    widgets = nb.get("metadata", {}).get("widgets", {})
    saved = widgets.get(WIDGET_STATE, {}).get("state", {})
    problems = []
    for number, cell in enumerate(nb.get("cells", []), start=1):
        for output in cell.get("outputs", []):
            view = output.get("data", {}).get(WIDGET_VIEW)
            if view and view.get("model_id") not in saved:
                counted = cell.get("execution_count")
                where = f"cell {number}" + (f" (In [{counted}])" if counted else "")
                problems.append(
                    f"live figure in {where} has no saved widget state (model "
                    f"{view.get('model_id')}): it would be blank in the book. Re-execute the "
                    "notebook with `make execute NOTEBOOKS=...` (a notebook saved from "
                    "JupyterLab does not keep widget state)"
                )
    return problems


def math_problems(markdown: str) -> list[str]:
    """What MathJax would fail on in ``markdown``'s ``$...$`` and ``$$...$$`` (code left out)."""
    text = CODE.sub("", markdown).replace(r"\$", "")
    problems = []
    for match in MATH.finditer(text):
        body = match.group(1) if match.group(1) is not None else match.group(2)
        shown = " ".join(body.split())[:60]
        plain = re.sub(r"\\[{}]", "", body)
        if plain.count("{") != plain.count("}"):
            problems.append(f"unbalanced braces in ${shown}$")
        if len(re.findall(r"\\left\b", body)) != len(re.findall(r"\\right\b", body)):
            problems.append(f"\\left without \\right in ${shown}$")
        begins = re.findall(r"\\begin\{([^}]*)\}", body)
        if sorted(begins) != sorted(re.findall(r"\\end\{([^}]*)\}", body)):
            problems.append(f"\\begin without its \\end in ${shown}$")
    rest = MATH.sub("", text)
    if "$" in rest:
        start = rest.index("$")
        problems.append(f"a $ opens maths that never closes: {rest[start : start + 40]!r}")
    return problems


def _math_warnings(markdown: str, docname: str, where: str = "") -> None:
    for problem in math_problems(markdown):
        logger.warning(
            f"broken LaTeX{where}: {problem}",
            location=docname,
            type="notebook_checks",
            subtype="latex",
        )


def _source_read(app: Sphinx, docname: str, source: list[str]) -> None:
    path = app.env.doc2path(docname)
    if str(path).endswith(".md"):
        _math_warnings(source[0], docname)
    if not str(path).endswith(".ipynb"):
        return
    why = invalid_json(source[0])
    if why:
        logger.error(
            f"{path} is not valid notebook JSON: {why}",
            location=docname,
            type="notebook_checks",
            subtype="invalid_json",
        )
        source[0] = EMPTY_NOTEBOOK
        return
    nb = json.loads(source[0])
    for problem in views_without_state(nb):
        logger.warning(problem, location=docname, type="notebook_checks", subtype="widget_state")
    for number, cell in enumerate(nb["cells"], start=1):
        if cell.get("cell_type") == "markdown":
            text = "".join(cell["source"]) if isinstance(cell["source"], list) else cell["source"]
            _math_warnings(text, docname, f" in cell {number}")


def setup(app: Sphinx) -> dict:
    app.connect("source-read", _source_read, priority=100)  # before plain_links (500)
    return {"version": "1.0", "parallel_read_safe": True, "parallel_write_safe": True}
