"""One notation: every symbol a chapter's prose uses is listed in book/notation.md, with the
chapters that use it, and each symbol has one row (one meaning; the bold letter is the
vector or matrix of the italic one's size, as the page says).

A symbol is a Latin letter, a Greek letter or a calligraphic letter in the chapter's Markdown
maths (``$...$`` and ``$$...$$``), bold or not; text inside ``\\text{}``,
``\\operatorname{}`` and ``\\mathrm{}`` and the number sets (``\\mathbb{R}``) are not symbols.
When a chapter starts using a letter, add the chapter to that letter's row, or a row for
it, and check the meaning is the one the row gives.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
NOTATION = ROOT / "book" / "notation.md"
CHAPTERS = sorted((ROOT / "chapters").glob("*.ipynb"))

GREEK = set(
    """alpha beta gamma delta epsilon zeta eta theta iota kappa lambda mu nu xi pi rho
sigma tau upsilon phi chi psi omega Gamma Delta Theta Lambda Xi Pi Sigma Upsilon Phi Psi Omega
ell""".split()
)
# Commands whose argument is not a symbol, and commands that are operators or layout.
DROP_ARG = re.compile(
    r"\\(?:text|textrm|textbf|textit|texttt|mathrm|operatorname|mbox|mathbb"
    r"|label|tag|href|color|colorbox|begin|end)\s*\{[^{}]*\}"
)
CALLIGRAPHIC = re.compile(r"\\mathcal\s*\{?\s*([A-Za-z])\}?")
COMMAND = re.compile(r"\\([A-Za-z]+)")


def math_spans(markdown: str) -> list[str]:
    text = re.sub(r"```.*?```", " ", markdown, flags=re.S)
    text = re.sub(r"`[^`\n]*`", " ", text)
    text = re.sub(r"<[^<>\n]*>", " ", text)  # HTML tags (<details>, <summary>)
    spans = re.findall(r"\$\$(.+?)\$\$", text, flags=re.S)
    text = re.sub(r"\$\$(.+?)\$\$", " ", text, flags=re.S)
    spans += re.findall(r"(?<![\\$])\$([^$\n]+?)\$", text)
    return spans


def symbols(tex: str) -> set[str]:
    """The symbols in one span of TeX: 'x', 'W', '\\alpha', '\\mathcal{L}'."""
    tex = DROP_ARG.sub(" ", tex)
    found = {f"\\mathcal{{{c}}}" for c in CALLIGRAPHIC.findall(tex)}
    tex = CALLIGRAPHIC.sub(" ", tex)
    for name in COMMAND.findall(tex):
        base = name.removeprefix("var")
        if base in GREEK:
            found.add("\\" + base)
    tex = COMMAND.sub(" ", tex)
    found |= set(re.findall(r"[A-Za-z]", tex))
    return found


def chapter_number(path: Path) -> int:
    return int(path.name[:2])


def chapter_symbols(path: Path) -> set[str]:
    nb = json.loads(path.read_text(encoding="utf-8"))
    text = "\n".join("".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "markdown")
    return set().union(*map(symbols, math_spans(text)))


def chapter_list(text: str) -> set[int]:
    """'1, 3–5, 9' -> {1, 3, 4, 5, 9}."""
    out: set[int] = set()
    for part in re.split(r"\s*,\s*", text.strip()):
        if not part:
            continue
        bounds = re.split(r"\s*[–-]\s*", part)
        lo, hi = int(bounds[0]), int(bounds[-1])
        out |= set(range(lo, hi + 1))
    return out


def notation_rows() -> list[tuple[set[str], str, set[int]]]:
    """(symbols, meaning, chapters) of each row of the table 'Every symbol'."""
    text = NOTATION.read_text(encoding="utf-8")
    section = text.split("## Every symbol", 1)[1].split("\n## ", 1)[0]
    rows = []
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) != 3 or not cells[2] or set(cells[2]) <= set("-: "):
            continue
        if cells[2] == "chapters":
            continue
        names = set().union(*map(symbols, re.findall(r"\$([^$]+)\$", cells[0])))
        rows.append((names, cells[1], chapter_list(cells[2])))
    return rows


def test_the_table_is_there():
    rows = notation_rows()
    assert len(rows) > 30, f"book/notation.md's table 'Every symbol' has {len(rows)} rows"


def test_each_symbol_has_one_row():
    seen: dict[str, str] = {}
    twice = []
    for names, meaning, _ in notation_rows():
        for name in names:
            if name in seen:
                twice.append(f"{name}: '{seen[name][:40]}' and '{meaning[:40]}'")
            seen[name] = meaning
    assert twice == [], f"symbols with two rows (two meanings) in notation.md: {twice}"


@pytest.mark.parametrize("path", CHAPTERS, ids=[p.stem for p in CHAPTERS])
def test_every_symbol_is_listed_for_the_chapter(path):
    listed: dict[str, set[int]] = {}
    for names, _, chapters in notation_rows():
        for name in names:
            listed.setdefault(name, set()).update(chapters)
    n = chapter_number(path)
    missing = sorted(s for s in chapter_symbols(path) if n not in listed.get(s, set()))
    assert missing == [], (
        f"{path.name} uses symbols that book/notation.md does not list for chapter {n}: "
        f"{missing}. Add the chapter to the symbol's row (if the meaning is the same) or "
        "choose a letter whose row fits."
    )


def test_no_row_lists_a_chapter_that_does_not_use_it():
    used = {chapter_number(p): chapter_symbols(p) for p in CHAPTERS}
    stale = [
        f"{sorted(names)} in chapter {n}"
        for names, _, chapters in notation_rows()
        for n in sorted(chapters)
        if n in used and not names & used[n]
    ]
    assert stale == [], f"notation.md lists symbols for chapters that do not use them: {stale}"
