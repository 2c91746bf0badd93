"""Sphinx extension: the theme's pages, lighter and accessible.

1. Page weight. The theme (pydata-sphinx-theme, under sphinx-book-theme) draws a handful of
   icons with FontAwesome 6: it loads ``scripts/fontawesome.js`` (1.5 MB, every icon as SVG)
   on every page, and its CSS declares the three FontAwesome webfonts (0.3 MB for the two a
   page uses). The template ``book/_templates/layout.html`` drops the script (and the
   search-as-you-type scripts, unused: the theme's ``search_as_you_type`` is off); this
   extension replaces the fonts with subsets:

   * When the build finishes, it collects the icons the site uses: the ``fa-*`` classes of
     every built page (mapped to code points through the theme's CSS) and every icon code
     point the theme's and extensions' CSS puts in a pseudo-element (``content: "\\f107"``,
     ``--pst-icon-*``: admonitions, external links, breadcrumbs, ...).
   * It writes those glyphs of the theme's FontAwesome fonts, subset with fontTools, to
     ``_static/icons/fa-*.woff`` (a few kB each). ``book/assets/book.css`` declares them for
     the same font families and weights after the theme's CSS, so the browser uses them and
     never downloads the full fonts (tests/test_browser.py checks both: no full font is
     requested, and every icon drawn on a page is in the subset).

2. Accessibility (the axe-core audit in tests/test_browser.py), in each page's body:

   * myst-nb's "Show code cell content" toggles: ``<summary aria-label="Toggle hidden
     content">`` hid the visible text from the accessible name (axe: label-content-name-
     mismatch); the summary is named by its text.
   * sphinxcontrib-bibtex's citation list has ``role="list"`` but its entries
     ``role="doc-biblioentry"`` (a role DPUB-ARIA 1.1 deprecates for ``listitem``): a list
     without items (axe: aria-required-children). The entries become list items.

3. It checks that the widget manager bundle (``book/vendor/widgets/embed.js``, built by
   ``book/tools/vendor.py``) is newer than its sources in ``book/tools/widgets``.
"""

from __future__ import annotations

import re
from pathlib import Path

from sphinx.application import Sphinx
from sphinx.errors import ExtensionError
from sphinx.util import logging

logger = logging.getLogger(__name__)

HERE = Path(__file__).resolve().parent
# (theme font file, subset written to _static/icons/)
FONTS = [
    ("fa-solid-900.ttf", "fa-solid-900.woff"),
    ("fa-regular-400.ttf", "fa-regular-400.woff"),
    ("fa-brands-400.ttf", "fa-brands-400.woff"),
]
# FontAwesome's class map: .fa-rocket:before{content:"\f135"} (several selectors per rule).
ICON_RULE = re.compile(r'((?:\.fa-[a-z0-9-]+:{1,2}before,?)+)\{content:"\\([0-9a-f]{4,5})"\}')
ICON_NAME = re.compile(r"\.fa-([a-z0-9-]+):")
# An icon code point anywhere else in CSS: an escape or a literal private-use character.
CSS_ESCAPE = re.compile(r"\\(f[0-9a-f]{3}|e[0-9a-f]{3})(?![0-9a-f])", re.I)
PRIVATE_USE = re.compile("[\ue000-\uf8ff]")
CLASS_ATTR = re.compile(r'class="([^"]*\bfa-[^"]*)"')
FA_CLASS = re.compile(r"\bfa-([a-z0-9-]+)")


def _theme_webfonts() -> Path:
    import pydata_sphinx_theme

    return (
        Path(pydata_sphinx_theme.__file__).parent
        / "theme"
        / "pydata_sphinx_theme"
        / "static"
        / "vendor"
        / "fontawesome"
        / "webfonts"
    )


def icon_code_points(static: Path, pages: list[Path]) -> set[int]:
    """The FontAwesome code points the built site can draw."""
    class_map: dict[str, int] = {}
    points: set[int] = set()
    for css in static.rglob("*.css"):
        if "mathjax" in css.parts or "widgets" in css.parts:
            continue
        text = css.read_text(encoding="utf-8", errors="replace")
        for rule in ICON_RULE.finditer(text):
            for name in ICON_NAME.findall(rule.group(1)):
                class_map[name] = int(rule.group(2), 16)
        rest = ICON_RULE.sub("", text)  # outside the class map: icons the CSS draws itself
        points |= {int(m, 16) for m in CSS_ESCAPE.findall(rest)}
        points |= {ord(c) for c in PRIVATE_USE.findall(rest)}
    for page in pages:
        for attr in CLASS_ATTR.findall(page.read_text(encoding="utf-8", errors="replace")):
            points |= {class_map[n] for n in FA_CLASS.findall(attr) if n in class_map}
    return points


def subset_fonts(static: Path, points: set[int]) -> list[Path]:
    from fontTools import subset
    from fontTools.ttLib import TTFont

    out = static / "icons"
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for source, target in FONTS:
        font = TTFont(_theme_webfonts() / source)
        options = subset.Options()
        options.flavor = "woff"  # zlib: no brotli module needed, and a few kB either way
        options.layout_features = []
        options.name_IDs = [1, 2]
        options.notdef_outline = True
        options.hinting = False
        subsetter = subset.Subsetter(options)
        # a space too, should a template leave one inside an icon element
        subsetter.populate(unicodes=sorted(points | {0x20}))
        subsetter.subset(font)
        font.flavor = "woff"
        font.save(out / target)
        written.append(out / target)
    return written


def _write_icon_fonts(app: Sphinx, exception: Exception | None) -> None:
    if exception is not None or app.builder.format != "html":
        return
    outdir = Path(app.outdir)
    static = outdir / "_static"
    pages = [p for p in outdir.rglob("*.html") if "_static" not in p.parts]
    points = icon_code_points(static, pages)
    if not points:
        logger.warning("theme_fixes: no FontAwesome icon found in the theme's CSS")
        return
    fonts = subset_fonts(static, points)
    size = sum(p.stat().st_size for p in fonts)
    logger.info(f"theme_fixes: {len(points)} icons in {len(fonts)} subset fonts ({size} bytes)")


# (what the theme or an extension writes, what the page gets)
BODY_FIXES = [
    ('<summary aria-label="Toggle hidden content">', "<summary>"),
    ('role="doc-biblioentry"', 'role="listitem"'),
]


def _fix_body(app: Sphinx, pagename: str, templatename: str, context: dict, doctree) -> None:
    body = context.get("body")
    if body:
        for old, new in BODY_FIXES:
            body = body.replace(old, new)
        context["body"] = body


def _check_widget_bundle(app: Sphinx) -> None:
    bundle = Path(app.confdir) / "book" / "vendor" / "widgets" / "embed.js"
    sources = list((HERE / "widgets").glob("*"))
    if bundle.is_file() and any(s.stat().st_mtime > bundle.stat().st_mtime for s in sources):
        raise ExtensionError(
            "the widget manager bundle is older than book/tools/widgets: "
            "run `python book/tools/vendor.py`"
        )


def setup(app: Sphinx) -> dict:
    app.connect("builder-inited", _check_widget_bundle)
    app.connect("html-page-context", _fix_body)
    app.connect("build-finished", _write_icon_fonts)
    return {"version": "1.0", "parallel_read_safe": True, "parallel_write_safe": True}
