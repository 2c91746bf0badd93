"""The glossary: every entry has a Chinese name and a definition; every {term} a chapter
uses is defined there (Sphinx's -n build also fails on an unknown term)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
GLOSSARY = ROOT / "book" / "glossary.md"
CJK = re.compile(r"[\u4e00-\u9fff]")


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


def chapter_terms(path: Path) -> set[str]:
    nb = json.loads(path.read_text(encoding="utf-8"))
    text = "\n".join("".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "markdown")
    terms = set()
    for inner in re.findall(r"\{term\}`([^`]+)`", text):
        match = re.search(r"<([^>]+)>\s*$", inner)
        terms.add(match.group(1) if match else inner)
    return terms


def test_glossary_entries_are_bilingual():
    entries = glossary_entries()
    assert len(entries) >= 10
    for term, definition in entries.items():
        assert CJK.search(definition), f"glossary term {term!r} has no Chinese name"
        assert len(definition.split("·", 1)[-1].strip()) > 15, f"{term!r} needs a definition"


CHAPTERS = sorted((ROOT / "chapters").glob("*.ipynb"))


@pytest.mark.parametrize("path", CHAPTERS, ids=[p.name for p in CHAPTERS])
def test_chapter_terms_are_in_the_glossary(path):
    terms = chapter_terms(path)
    assert len(terms) >= 3, f"{path.name}: link the terms it defines to the glossary with {{term}}"
    missing = sorted(terms - set(glossary_entries()))
    assert not missing, f"{path.name}: terms missing from book/glossary.md: {missing}"
