"""Text twins of the notebooks: each ``.ipynb`` has a ``py:percent`` twin beside it.

An executed notebook is JSON with outputs and widget state, so a one-line prose fix is an
unreadable diff. Its twin (``chapters/NN_name.py``, ``book/intro.py``) holds the same cells
as plain text: Markdown as ``#`` comments, code as code, tags on each ``# %%`` line
(jupytext's percent format, as The Annotated Transformer keeps its source). Reviewers read
the twin's diff; ``tests/test_text_twins.py`` fails when a twin and its notebook differ.

    python book/tools/twins.py                    # write every twin from its notebook
    python book/tools/twins.py chapters/NN_name.ipynb ...   # only these notebooks' twins
    python book/tools/twins.py --check            # exit 1 if a twin is out of date
    python book/tools/twins.py --to-notebook chapters/NN_name.py
        # after editing a twin: copy its cells into the notebook, keeping the outputs of
        # unchanged code cells; then re-execute (make execute NOTEBOOKS=...) and run again
"""

from __future__ import annotations

import sys
from pathlib import Path

import jupytext
import nbformat
from jupytext.combine import combine_inputs_with_outputs

ROOT = Path(__file__).resolve().parents[2]
FORMAT = "py:percent"
# No notebook-level header (kernel and jupytext version): the twin is the cells alone.
OPTIONS = {"notebook_metadata_filter": "-all", "cell_metadata_filter": "tags"}


def notebooks() -> list[Path]:
    return [*sorted((ROOT / "chapters").glob("*.ipynb")), ROOT / "book" / "intro.ipynb"]


def twin_path(notebook: Path) -> Path:
    return notebook.with_suffix(".py")


def twin_text(notebook: Path) -> str:
    nb = nbformat.read(notebook, as_version=4)
    nb.metadata.setdefault("jupytext", {}).update(OPTIONS)
    return jupytext.writes(nb, fmt=FORMAT)


def to_notebook(twin: Path) -> Path:
    """Copy the twin's cells into its notebook, keeping outputs where the code is unchanged."""
    notebook = twin.with_suffix(".ipynb")
    old = nbformat.read(notebook, as_version=4)
    new = jupytext.read(twin, fmt=FORMAT)
    combined = combine_inputs_with_outputs(new, old, fmt=FORMAT)
    combined.metadata = old.metadata
    nbformat.write(combined, notebook)
    return notebook


def main(argv: list[str]) -> int:
    if argv[:1] in (["-h"], ["--help"]):
        print(__doc__)
        return 0
    if argv[:1] == ["--to-notebook"]:
        for name in argv[1:]:
            path = to_notebook(Path(name).resolve())
            print(
                f"updated {path.relative_to(ROOT)}: re-execute it, then run "
                "python book/tools/twins.py"
            )
        return 0
    check = "--check" in argv
    named = [a for a in argv if a != "--check"]
    unknown = [a for a in named if a.startswith("-") or not a.endswith(".ipynb")]
    if unknown:
        print(f"error: not a notebook or an option: {' '.join(unknown)}\n{__doc__}")
        return 2
    chosen = [Path(a).resolve() for a in named] or notebooks()
    missing = [str(p) for p in chosen if not p.is_file()]
    if missing:
        print(f"error: no such notebook: {' '.join(missing)}")
        return 2
    stale = []
    for notebook in chosen:
        text, twin = twin_text(notebook), twin_path(notebook)
        if twin.is_file() and twin.read_text(encoding="utf-8") == text:
            continue
        stale.append(twin.relative_to(ROOT).as_posix())
        if not check:
            twin.write_text(text, encoding="utf-8")
    if stale:
        print(("out of date: " if check else "wrote: ") + ", ".join(stale))
        if check:
            print("run: python book/tools/twins.py")
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
