"""Citations: every key a chapter cites is in book/references.bib, every entry there is
cited somewhere, and the book's core papers are all cited."""

from __future__ import annotations

import json
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CORE = {"nadaraya1964", "watson1964", "bahdanau2015", "vaswani2017", "ba2016", "xiong2020",
        "su2021", "ramsauer2020", "dao2022"}


def bib_keys() -> set[str]:
    text = (ROOT / "book" / "references.bib").read_text(encoding="utf-8")
    return set(re.findall(r"^@\w+\{([^,]+),", text, re.M))


def cited_keys() -> dict[str, set[str]]:
    cited: dict[str, set[str]] = {}
    for path in sorted((ROOT / "chapters").glob("*.ipynb")) + [ROOT / "book" / "intro.ipynb"]:
        nb = json.loads(path.read_text(encoding="utf-8"))
        text = "\n".join("".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "markdown")
        for group in re.findall(r"\{cite(?::\w+)?\}`([^`]+)`", text):
            for key in group.split(","):
                cited.setdefault(key.strip(), set()).add(path.name)
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
