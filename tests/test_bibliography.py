"""Citations: every key a notebook cites is in book/references.bib, every entry there is
cited somewhere, the book's core papers are all cited, and each citation's text is the one the
book renders.

The notebooks cite as plain Markdown links to the BibTeX entry: a textual citation
``[Vaswani et al. [2017]](../book/references.bib#vaswani2017)`` (the book's ``{cite:t}``), a
parenthetical one ``[[Vaswani et al., 2017]](../book/references.bib#vaswani2017)``
(``{cite:p}``); book/_ext/plain_links.py turns them into those roles at build time.
"""

from __future__ import annotations

import json
import posixpath
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "book" / "tools"))
import myst_links  # noqa: E402

CORE = {
    "nadaraya1964",
    "watson1964",
    "bahdanau2015",
    "vaswani2017",
    "ba2016",
    "xiong2020",
    "su2021",
    "ramsauer2020",
    "dao2022",
}
NOTEBOOKS = sorted((ROOT / "chapters").glob("*.ipynb")) + [ROOT / "book" / "intro.ipynb"]
# [text](url), the text allowing one level of balanced brackets ("[Dao, 2024]")
LINK = re.compile(r"(?<!!)\[((?:\\.|[^\[\]\\]|\[[^\[\]]*\])*)\]\(([^()\s]+)\)")


def bib_keys() -> set[str]:
    text = (ROOT / "book" / "references.bib").read_text(encoding="utf-8")
    return set(re.findall(r"^@\w+\{([^,]+),", text, re.M))


def citations() -> list[tuple[str, str, str]]:
    """(notebook, link text, key) of every link to book/references.bib in a Markdown cell."""
    found = []
    for path in NOTEBOOKS:
        nb = json.loads(path.read_text(encoding="utf-8"))
        text = "\n".join("".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "markdown")
        folder = path.parent.relative_to(ROOT).as_posix()
        for label, url in LINK.findall(text):
            target, _, key = url.partition("#")
            if posixpath.normpath(posixpath.join(folder, target)) == "book/references.bib":
                found.append((path.name, label, key))
    return found


def cited_keys() -> dict[str, set[str]]:
    cited: dict[str, set[str]] = {}
    for name, _, key in citations():
        cited.setdefault(key, set()).add(name)
    return cited


def test_every_cited_key_is_in_the_bibliography():
    missing = sorted(set(cited_keys()) - bib_keys())
    assert not missing, f"cited but not in book/references.bib: {missing}"


def test_every_bibliography_entry_is_cited():
    unused = sorted(bib_keys() - set(cited_keys()))
    assert not unused, f"in book/references.bib but never cited: {unused}"


def test_the_core_papers_are_cited():
    missing = sorted(CORE - set(cited_keys()))
    assert not missing, f"core papers never cited in a chapter: {missing}"


def test_citation_texts_are_the_books():
    """A reader in Jupyter sees the text the book renders for {cite:t} or {cite:p}."""
    keys = bib_keys()
    wrong = []
    for name, label, key in citations():
        if key not in keys:
            continue  # reported by test_every_cited_key_is_in_the_bibliography
        kind = myst_links.citation_kind(label)
        expected = myst_links.citation_text(key, kind)
        if label != expected:
            wrong.append(f"{name}: [{label}] should read [{expected}]")
    assert not wrong, (
        "citation texts differ from the book's (`python book/tools/myst_links.py` "
        f"rewrites them): {wrong}"
    )
