"""Sphinx extension: static figures that fit the screen they are read on.

When a chapter runs, ``book/tools/execute.py`` records in each static figure's output
metadata its smallest text at natural size (``smallest_text_px``) and, for a figure of
side-by-side panels, where it can be cut between them (``panels``, fractions of its width,
from ``helpers.figures.frames.panel_columns``). MyST-NB names an output's image in
``_images/`` by the SHA-256 of its PNG; this extension finds each such ``<img>`` in a page and:

- gives it the width at which its smallest text is 9 CSS px as its minimum width, so it
  shrinks with a narrow column (a phone's) only as far as its text stays readable, and
  ``data-text-px`` (its smallest text at natural size), which the browser tests read;
- cuts a figure of side-by-side panels into one image per panel (``_images/<sha>-<n>.png``,
  written beside the others) in a ``div.figure-panels`` named by the figure's alt text: on a
  wide screen the panels sit side by side at one scale, as drawn; where the column cannot
  hold them at 9-px text, they wrap, one under another, each as large as the column allows.

The CSS is in book/assets/book.css and phone.css.
"""

from __future__ import annotations

import base64
import hashlib
import io
import json
import re
from functools import cache
from pathlib import Path

from sphinx.application import Sphinx

MIN_TEXT_PX = 9.0  # helpers.figures.frames.MIN_TEXT_PX
IMG = re.compile(r'<img\b[^>]*?\bsrc="(?P<src>[^"]*_images/(?P<sha>[0-9a-f]{64})\.png)"[^>]*>')
ALT = re.compile(r'\balt="(?P<alt>[^"]*)"')


@cache
def recorded(srcdir: str) -> dict[str, dict]:
    """Every static figure's record, by the SHA-256 of its PNG: {"px", "panels", "png"}."""
    root = Path(srcdir)
    found = {}
    chinese = sorted((root / "locales" / "zh_CN" / "notebooks").rglob("*.ipynb"))  # 中文版
    for path in [
        *sorted((root / "chapters").glob("*.ipynb")),
        root / "book" / "intro.ipynb",
        *chinese,
    ]:
        if not path.is_file():
            continue
        for cell in json.loads(path.read_text(encoding="utf-8")).get("cells", []):
            for output in cell.get("outputs", []):
                png = output.get("data", {}).get("image/png")
                book = output.get("metadata", {}).get("book", {})
                if png and "smallest_text_px" in book:
                    raw = base64.b64decode("".join(png))
                    found[hashlib.sha256(raw).hexdigest()] = {
                        "px": book["smallest_text_px"],
                        "panels": book.get("panels", [0.0, 1.0]),
                        "png": raw,
                    }
    return found


def min_width(width: int, text_px: float | None) -> int:
    """The width (CSS px) at which a figure ``width`` px wide, whose smallest text is
    ``text_px`` at that width, shows that text at 9 px: it may shrink to this, not below."""
    if not text_px:
        return 0
    return min(width, int(-(-width * MIN_TEXT_PX // text_px)))  # rounded up


def _text(record: dict) -> str:
    """``data-text-px``: the smallest text at natural size, ``none`` when it draws none (as a
    live frame's, helpers.figures.widgets)."""
    return "none" if record["px"] is None else str(record["px"])


def _panel_tags(record: dict, src: str, sha: str, alt: str, outdir: Path) -> str:
    from PIL import Image

    from helpers.figures.frames import split_png

    pieces = split_png(record["png"], record["panels"])
    folder = src.rsplit("/", 1)[0]
    tags = []
    for n, piece in enumerate(pieces, start=1):
        target = outdir / "_images" / f"{sha}-{n}.png"
        if not target.is_file():
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(piece)
        with Image.open(io.BytesIO(piece)) as image:
            width, height = image.size
        low = min_width(width, record["px"])
        tags.append(
            f'<img src="{folder}/{sha}-{n}.png" alt="" width="{width}" height="{height}" '
            f'class="figure-panel" data-text-px="{_text(record)}" '
            f'style="flex: {width} 1 {low}px; min-width: {low}px; max-width: {width}px" />'
        )
    return f'<div class="figure-panels" role="img" aria-label="{alt}">' + "".join(tags) + "</div>"


def _page_context(app: Sphinx, pagename: str, templatename: str, context: dict, doctree):
    body = context.get("body")
    if app.builder.format != "html" or not body or "_images/" not in body:
        return
    records = recorded(str(app.srcdir))
    outdir = Path(app.outdir)

    def figure(match: re.Match) -> str:
        record = records.get(match.group("sha"))
        if record is None:
            return match.group(0)
        tag = match.group(0)
        alt_match = ALT.search(tag)
        alt = alt_match.group("alt") if alt_match else ""
        if len(record["panels"]) > 2:
            return _panel_tags(record, match.group("src"), match.group("sha"), alt, outdir)
        from PIL import Image

        with Image.open(io.BytesIO(record["png"])) as image:
            width, height = image.size
        low = min_width(width, record["px"])
        extra = (
            f'width="{width}" height="{height}" class="book-figure" '
            f'data-text-px="{_text(record)}" style="min-width: {low}px"'
        )
        return f"{tag.removesuffix('>').removesuffix('/').rstrip()} {extra} />"

    context["body"] = IMG.sub(figure, body)


def setup(app: Sphinx) -> dict:
    app.connect("html-page-context", _page_context)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
