"""Execute chapter notebooks in place with nbclient, saving outputs and widget state.

JupyterLab does not save widget state by default, so a notebook saved from Lab renders blank
widgets in the book. Run ``make execute`` (this script) before committing a chapter.

    python book/tools/execute.py [chapters/NN_name.ipynb ...]   # default: every chapter + intro
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import nbformat
from nbclient import NotebookClient

ROOT = Path(__file__).resolve().parents[2]
TIMEOUT_PER_CELL = 300


def execute(path: Path) -> float:
    """Run ``path`` top to bottom in a fresh kernel, write it back, return seconds taken."""
    nb = nbformat.read(path, as_version=4)
    client = NotebookClient(
        nb,
        timeout=TIMEOUT_PER_CELL,
        kernel_name="python3",
        resources={"metadata": {"path": str(path.parent)}},
        store_widget_state=True,
        record_timing=False,
    )
    start = time.perf_counter()
    client.execute()
    elapsed = time.perf_counter() - start
    nb.metadata.pop("widgets", None) if not _has_widgets(nb) else None
    nbformat.write(nb, path)
    return elapsed


def _has_widgets(nb) -> bool:
    state = (
        nb.metadata.get("widgets", {})
        .get("application/vnd.jupyter.widget-state+json", {})
        .get("state", {})
    )
    return bool(state)


def main(argv: list[str]) -> int:
    paths = [Path(p) for p in argv] or [
        *sorted((ROOT / "chapters").glob("*.ipynb")),
        ROOT / "book" / "intro.ipynb",
    ]
    for path in paths:
        seconds = execute(path.resolve())
        print(f"executed {path.name} in {seconds:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
