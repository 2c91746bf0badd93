"""The glossary: every entry has a Chinese name and a definition; every glossary link in a
notebook names a term that is defined there (the book's build also fails on one that does not).

The notebooks link a term as plain Markdown, ``[queries](../book/glossary.md#term-query)``:
the fragment is Sphinx's id of the term on the built glossary page, and at build time
book/_ext/plain_links.py turns the link into ``{term}`queries <query>```.
"""

from __future__ import annotations

import json
import posixpath
import re
from pathlib import Path

import pytest
from sphinx.util.nodes import _make_id

ROOT = Path(__file__).resolve().parents[1]
GLOSSARY = ROOT / "book" / "glossary.md"
CJK = re.compile(r"[\u4e00-\u9fff]")
# [text](url), the text allowing one level of balanced brackets
LINK = re.compile(r"(?<!!)\[((?:\\.|[^\[\]\\]|\[[^\[\]]*\])*)\]\(([^()\s]+)\)")
CHAPTERS = sorted((ROOT / "chapters").glob("*.ipynb"))
NOTEBOOKS = CHAPTERS + [ROOT / "book" / "intro.ipynb"]


def glossary_entries() -> dict[str, str]:
    """Map each glossary term to its definition text."""
    entries: dict[str, str] = {}
    text = GLOSSARY.read_text(encoding="utf-8")
    for block in re.findall(r"```\{glossary\}\n(.*?)```", text, re.S):
        term = None
        for line in block.splitlines():
            if not line.strip():
                continue
            if not line.startswith((" ", "\t")):
                term = line.strip()
                entries[term] = ""
            elif term is not None:
                entries[term] += line.strip() + " "
    return entries


def term_ids() -> dict[str, list[str]]:
    """Map each id on the built glossary page (Sphinx's: 'term-' plus the term as an id,
    e.g. term-multilayer-perceptron-MLP) to the terms that get it."""
    ids: dict[str, list[str]] = {}
    for term in glossary_entries():
        ids.setdefault(_make_id("term-" + term), []).append(term)
    return ids


def glossary_links(path: Path) -> list[tuple[str, str]]:
    """(text, fragment) of every link from a notebook's Markdown cells to book/glossary.md
    with a fragment (a link to the page itself has none)."""
    nb = json.loads(path.read_text(encoding="utf-8"))
    text = "\n".join("".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "markdown")
    folder = path.parent.relative_to(ROOT).as_posix()
    links = []
    for label, url in LINK.findall(text):
        target, _, fragment = url.partition("#")
        if posixpath.normpath(posixpath.join(folder, target)) == "book/glossary.md" and fragment:
            links.append((label, fragment))
    return links


def test_glossary_entries_are_bilingual():
    entries = glossary_entries()
    assert len(entries) >= 10
    for term, definition in entries.items():
        assert CJK.search(definition), f"glossary term {term!r} has no Chinese name"
        assert len(definition.split("·", 1)[-1].strip()) > 15, f"{term!r} needs a definition"


def test_every_term_has_its_own_id():
    shared = {ident: terms for ident, terms in term_ids().items() if len(terms) > 1}
    assert not shared, (
        f"glossary terms with the same id (Sphinx numbers the second, no link can name it): "
        f"{shared}"
    )


@pytest.mark.parametrize("path", CHAPTERS, ids=[p.name for p in CHAPTERS])
def test_chapter_links_its_terms(path):
    terms = {fragment for _, fragment in glossary_links(path)}
    assert len(terms) >= 3, (
        f"{path.name}: link the terms it defines to the glossary, "
        "[text](../book/glossary.md#term-...)"
    )


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.name for p in NOTEBOOKS])
def test_glossary_links_name_real_terms(path):
    ids = term_ids()
    unknown = sorted(
        {
            f"[{label}](...#{fragment})"
            for label, fragment in glossary_links(path)
            if fragment not in ids
        }
    )
    assert not unknown, (
        f"{path.name}: glossary links to no term of book/glossary.md: {unknown} (the fragment "
        "is term- plus the term as an id: `python book/tools/myst_links.py` writes it from "
        "{term}`text <term>`)"
    )


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.name for p in NOTEBOOKS])
def test_glossary_link_texts_are_plain(path):
    """The book renders a link's text literally (as the role's text): no Markdown in it."""
    marked = [label for label, _ in glossary_links(path) if re.search(r"[*_`$]|\]\(", label)]
    assert not marked, f"{path.name}: glossary link texts with Markdown in them: {marked}"
