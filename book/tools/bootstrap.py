"""The bootstrap cell every chapter starts with, and a checker/fixer for it.

The repository URL lives in one place, ``_config.yml`` (``repository.url``); every chapter's
first cell must be exactly ``cell_source(url)``. ``python book/tools/bootstrap.py --fix``
rewrites the cells after the URL changes (then re-run ``make execute``).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

TEMPLATE = '''\
# Run anywhere: on Colab or in a bare Jupyter, install the book's helpers package first.
BOOK_REPOSITORY = "{url}"
try:
    import helpers  # noqa: F401  (present in the book's own environment)
except ModuleNotFoundError:
    import importlib, os, subprocess, sys
    source = os.environ.get("HELPERS_SOURCE", "git+" + BOOK_REPOSITORY)
    subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", source], check=True)
    importlib.invalidate_caches()
    import helpers  # noqa: F401'''


def repository_url(config: Path = ROOT / "_config.yml") -> str:
    """Read ``repository.url`` from ``_config.yml`` (no YAML library needed)."""
    in_repository = False
    for line in config.read_text(encoding="utf-8").splitlines():
        if not line.startswith((" ", "\t")):
            in_repository = line.strip().startswith("repository:")
            continue
        key, _, value = line.strip().partition(":")
        if in_repository and key == "url":
            return value.strip().strip("\"'")
    raise ValueError(f"{config} has no repository.url")


def cell_source(url: str | None = None) -> str:
    return TEMPLATE.format(url=url or repository_url())


def chapters() -> list[Path]:
    """Every notebook that starts with the bootstrap cell: the chapters and the landing page."""
    return [*sorted((ROOT / "chapters").glob("*.ipynb")), ROOT / "book" / "intro.ipynb"]


def main(argv: list[str]) -> int:
    fix = "--fix" in argv
    want = cell_source()
    bad = []
    for path in chapters():
        nb = json.loads(path.read_text(encoding="utf-8"))
        first = nb["cells"][0]
        source = "".join(first["source"]) if isinstance(first["source"], list) else first["source"]
        if first["cell_type"] == "code" and source == want:
            continue
        bad.append(path.name)
        if fix and first["cell_type"] == "code" and "BOOK_REPOSITORY" in source:
            first["source"] = want
            path.write_text(json.dumps(nb, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    for name in bad:
        print(f"{name}: first cell is not the bootstrap cell{' (fixed)' if fix else ''}")
    return 1 if bad and not fix else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
