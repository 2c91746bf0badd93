"""Every notebook has a text twin (jupytext py:percent) beside it, in step with it.

The executed ``.ipynb`` is JSON with outputs and widget state; its twin ``NN_name.py`` is the
same cells as plain text, so a prose or code change reads as a small diff. Editing through
the twin: ``python book/tools/twins.py --to-notebook chapters/NN_name.py``, re-execute, then
``python book/tools/twins.py`` (CONTRIBUTING.md, *Editing through the text twin*).
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "book" / "tools"))
import twins  # noqa: E402

NOTEBOOKS = twins.notebooks()


@pytest.mark.parametrize("notebook", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_twin_matches_its_notebook(notebook):
    twin = twins.twin_path(notebook)
    assert twin.is_file(), f"{twin.relative_to(ROOT)} is missing: run python book/tools/twins.py"
    assert twin.read_text(encoding="utf-8") == twins.twin_text(notebook), (
        f"{twin.relative_to(ROOT)} differs from {notebook.name}: after editing the notebook "
        "run python book/tools/twins.py; after editing the twin run "
        f"python book/tools/twins.py --to-notebook {twin.relative_to(ROOT)} and re-execute"
    )


def test_twin_round_trips_to_the_same_notebook(tmp_path):
    """Writing a twin back into its notebook changes nothing: no cell, tag or output lost."""
    notebook = NOTEBOOKS[1]
    copy = tmp_path / notebook.name
    copy.write_bytes(notebook.read_bytes())
    twins.twin_path(copy).write_text(twins.twin_text(copy), encoding="utf-8")
    twins.to_notebook(twins.twin_path(copy))
    assert copy.read_bytes() == notebook.read_bytes()


def test_no_twin_without_a_notebook():
    strays = [
        p
        for folder in (ROOT / "chapters", ROOT / "book")
        for p in folder.glob("*.py")
        if not p.with_suffix(".ipynb").is_file()
    ]
    assert strays == [], f"text twins whose notebook is gone: {strays}"
