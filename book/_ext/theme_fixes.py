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

3. The built pages, once the build has finished (idempotent, so unchanged pages of an
   incremental build are treated again at no harm):

   * Chinese text (the glossary's terms, "术语表" in every page's sidebar) is marked
     ``<span lang="zh-Hans">``, so that a screen reader speaks it with a Chinese voice and the
     browser picks Simplified Chinese glyphs.
   * Each live figure's view tag gets ``data-figure-name``: what the figure shows, in the
     words its frames' alt texts share (``helpers.figures.widgets`` writes them), unique on
     the page. ``book/assets/slider-a11y.js`` names each slider handle after it
     ("encoder self-attention: layer"), so that a screen reader tells which figure a slider
     drives when a page has several sliders with the same label.
   * ``_static/print-light.css`` (imported by ``book/assets/book.css`` for print only) holds the
     theme's light palette under ``html[data-theme="dark"]``: a page printed from dark mode
     prints dark text on white paper, as one printed from light mode does.

4. A change to the book's static or extra files alone (book.css, the 404 page) reaches the
   site: Sphinx copies them only when it writes a document, so the root document is then
   written again.

5. It checks that the widget manager bundle (``book/vendor/widgets/embed.js``, built by
   ``book/tools/vendor.py``) is newer than its sources in ``book/tools/widgets``.
"""

from __future__ import annotations

import filecmp
import html
import json
import re
from pathlib import Path

from sphinx.application import Sphinx
from sphinx.errors import ExtensionError
from sphinx.util import logging

logger = logging.getLogger(__name__)

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
    sources = list((Path(app.confdir) / "book" / "tools" / "widgets").glob("*"))
    if bundle.is_file() and any(s.stat().st_mtime > bundle.stat().st_mtime for s in sources):
        raise ExtensionError(
            "the widget manager bundle is older than book/tools/widgets: "
            "run `python book/tools/vendor.py`"
        )


# --- Chinese text marked as such

# Han characters and CJK punctuation (full-width brackets, colon, comma, ideographic space).
CJK_RUN = re.compile("[\u3000-\u303f\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uff00-\uffef]+")
TAG = re.compile(r"(<[^>]*>)")
TAG_NAME = re.compile(r"</?([a-zA-Z][a-zA-Z0-9-]*)")
# Elements whose content is not text a reader sees as such (a <title> takes no markup).
RAW_TEXT = {"script", "style", "title", "textarea"}
ZH_OPEN = '<span lang="zh-Hans">'


def mark_chinese(page: str) -> str:
    """``page`` with every run of Chinese characters in its text wrapped in
    ``<span lang="zh-Hans">``; tags, attributes, scripts, styles and the title are left as
    they are, and a run already wrapped is not wrapped again."""
    out, raw, previous = [], None, ""
    for piece in TAG.split(page):
        if piece.startswith("<"):
            name = TAG_NAME.match(piece)
            name = name.group(1).lower() if name else ""
            if raw is not None:
                if piece.startswith("</") and name == raw:
                    raw = None
            elif name in RAW_TEXT and not piece.startswith("</") and not piece.endswith("/>"):
                raw = name
            out.append(piece)
            previous = piece
        elif raw is None and previous != ZH_OPEN and CJK_RUN.search(piece):
            out.append(CJK_RUN.sub(lambda m: f"{ZH_OPEN}{m.group(0)}</span>", piece))
        else:
            out.append(piece)
    return "".join(out)


# --- Live figures named for their sliders

STATE_TAG = re.compile(
    r'<script type="application/vnd\.jupyter\.widget-state\+json">(.*?)</script>', re.S
)
VIEW_TAG = re.compile(
    r'<script type="application/vnd\.jupyter\.widget-view\+json">(.*?)</script>', re.S
)
ALT = re.compile(r'\balt="([^"]*)"')
# The parts of a panel's title: "d = 2, entropy 1.93", "cue: 4 flipped", two-line titles.
SEGMENT = re.compile(r",\s+|:\s+|\n")


def _without_axes(text: str) -> str:
    """``text`` less its parenthesised axis descriptions "(queries against keys)"."""
    depth, start, groups = 0, 0, []
    for i, c in enumerate(text):
        if c == "(":
            start = i if depth == 0 else start
            depth += 1
        elif c == ")" and depth:
            depth -= 1
            if depth == 0:
                groups.append((start, i + 1))
    for a, b in reversed(groups):
        if " against " in text[a:b]:
            text = text[:a] + text[b:]
    return re.sub(r" {2,}", " ", text).strip()


def _panels(alt: str, descriptions: list[str]) -> list[str]:
    """The panel titles of one frame's alt text, less the parameter values the helpers add
    (", at layer = 1 and head = 0") and the axes."""
    for d in descriptions:
        at = alt.rfind(f", at {d} = ")
        if at >= 0:
            alt = alt[:at]
            break
    panels = (_without_axes(p) for p in alt.split("; "))
    return [p for p in panels if p and p != "a plot"]


def figure_title(alts: list[str], descriptions: list[str]) -> str:
    """What a live figure shows, in the words all its frames' alt texts share: the parts of
    the first panel title that no slider changes ("encoder self-attention", "softmax(q·k)"),
    else the words every frame's title begins with ("encoding of position t"); "" if none."""
    frames = [_panels(a, descriptions) for a in alts]
    frames = [f for f in frames if f]
    if not frames:
        return ""
    for j in range(max(len(f) for f in frames)):
        parts = [
            [s.strip() for s in SEGMENT.split(f[j]) if s.strip()] for f in frames if len(f) > j
        ]
        common = [s for s in parts[0] if all(s in other for other in parts[1:])]
        if common:
            return ", ".join(common)
    words = [f[0].split() for f in frames]
    prefix = []
    for same in zip(*words):
        if any(w != same[0] for w in same):
            break
        prefix.append(same[0])
    title = " ".join(prefix)
    return re.sub(r"\s*\S+\s*=$", "", title).strip(" ,:;=")


def name_live_figures(page: str) -> str:
    """``page`` with ``data-figure-name`` on the view tag of each live figure (a box of
    sliders over a Stack of frames), unique on the page."""
    state_tag = STATE_TAG.search(page)
    if state_tag is None:
        return page
    state = json.loads(state_tag.group(1))["state"]

    def children(model_id: str) -> list[str]:
        refs = state.get(model_id, {}).get("state", {}).get("children", [])
        return [r.removeprefix("IPY_MODEL_") for r in refs]

    def frame_alts(model_id: str) -> list[str]:
        model = state.get(model_id, {})
        if model.get("model_name") == "HTMLModel":
            alt = ALT.search(model["state"].get("value", ""))
            return [html.unescape(alt.group(1))] if alt else []
        return [a for child in children(model_id) for a in frame_alts(child)]

    names: list[str] = []

    def named(tag: re.Match) -> str:
        view = json.loads(tag.group(1))
        kids = children(view.get("model_id", ""))
        kinds = [state[k]["model_name"] if k in state else "" for k in kids]
        sliders = [
            state[k]["state"].get("description", "")
            for k, m in zip(kids, kinds)
            if m == "SelectionSliderModel"
        ]
        alts = [a for k, m in zip(kids, kinds) if m == "StackModel" for a in frame_alts(k)]
        if not sliders or not alts:
            return tag.group(0)
        title = figure_title(alts, sliders) or f"live figure {len(names) + 1}"
        if title in names:
            title = f"{title} (live figure {len(names) + 1})"
        names.append(title)
        return (
            '<script type="application/vnd.jupyter.widget-view+json" '
            f'data-figure-name="{html.escape(title)}">{tag.group(1)}</script>'
        )

    return VIEW_TAG.sub(named, page)


def _fix_built_pages(app: Sphinx, exception: Exception | None) -> None:
    if exception is not None or app.builder.format != "html":
        return
    outdir = Path(app.outdir)
    for path in outdir.rglob("*.html"):
        if "_static" in path.parts or "_sources" in path.parts:
            continue
        page = path.read_text(encoding="utf-8")
        # the Chinese edition's pages are Chinese as a whole (<html lang="zh-CN">)
        chinese = (app.config.language or "").startswith("zh")
        fixed = name_live_figures(page if chinese else mark_chinese(page))
        if fixed != page:
            path.write_text(fixed, encoding="utf-8")


# --- Print: the light palette, from dark mode too

THEME_CSS = ["styles/pydata-sphinx-theme.css", "styles/sphinx-book-theme.css", "pygments.css"]
# A top-level rule whose selectors name the light theme: its variables, pygments' colours.
LIGHT_RULE = re.compile(r'(?:^|(?<=[}\s]))(html\[data-theme="?light"?\][^{}@]*)\{([^{}]*)\}')
LIGHT = re.compile(r'html\[data-theme="?light"?\]')


def print_light_css(static: Path) -> str:
    """The theme's light-mode rules (its palette, pygments' light colours), for
    ``html[data-theme="dark"]``: loaded for print only, they make a page printed from dark
    mode look as one printed from light mode."""
    rules = []
    for name in THEME_CSS:
        css = static / name
        if not css.is_file():
            raise ExtensionError(f"theme_fixes: {css} not found: the theme's CSS moved")
        text = css.read_text(encoding="utf-8")
        # top level only: drop @media/@supports blocks (one level of nesting) first
        text = re.sub(r"@[a-z-]+[^{};]*\{(?:[^{}]*\{[^{}]*\})*[^{}]*\}", "", text)
        for selectors, body in LIGHT_RULE.findall(text):
            dark = LIGHT.sub('html[data-theme="dark"]', selectors.strip())
            rules.append(f"{dark}{{{body}}}")
    if not rules:
        raise ExtensionError("theme_fixes: no light-mode rule found in the theme's CSS")
    head = (
        "/* Written by book/_ext/theme_fixes.py: the theme's light palette for a page printed "
        "from dark mode (book.css imports this file for print only). */\n"
    )
    return head + "\n".join(rules) + "\n"


def _write_print_css(app: Sphinx, exception: Exception | None) -> None:
    if exception is not None or app.builder.format != "html":
        return
    static = Path(app.outdir) / "_static"
    (static / "print-light.css").write_text(print_light_css(static), encoding="utf-8")


# --- Changed assets reach the site


def _changed_assets(app: Sphinx, env, added, changed, removed) -> list[str]:
    """Sphinx copies the static and extra files (``html_static_path``, ``html_extra_path``:
    the book's CSS and scripts, the 404 page, the vendored JS) only when some document is
    written: a build after a change to those files alone left the old copies in the site.
    When one differs from its copy, the root document is written again, and the files with it."""
    if app.builder.format != "html":
        return []
    confdir, outdir = Path(app.confdir), Path(app.outdir)
    # the book's own paths (_config.yml's, relative); extensions add theirs as absolute paths
    trees = [(confdir / p, outdir / "_static") for p in app.config.html_static_path]
    trees += [(confdir / p, outdir) for p in app.config.html_extra_path]
    trees = [(s, t) for s, t in trees if s.resolve().is_relative_to(confdir.resolve())]
    trees = [(s, t) for s, t in trees if ".venv" not in s.resolve().parts]
    for source, target in trees:
        if source.is_file():
            files = [source]
        else:  # Sphinx leaves dotfiles (book/vendor/.stamp) out
            files = [f for f in source.rglob("*") if f.is_file() and not f.name.startswith(".")]
        for f in files:
            copy = target / (f.name if f == source else f.relative_to(source))
            if not copy.is_file() or not filecmp.cmp(f, copy, shallow=True):
                logger.info(f"theme_fixes: {f.relative_to(confdir)} changed: copying assets")
                return [app.config.root_doc]
    return []


def setup(app: Sphinx) -> dict:
    app.connect("builder-inited", _check_widget_bundle)
    app.connect("env-get-outdated", _changed_assets)
    app.connect("html-page-context", _fix_body)
    app.connect("build-finished", _write_icon_fonts)
    app.connect("build-finished", _fix_built_pages)
    # after pydata-sphinx-theme's own build-finished step, which writes pygments.css's
    # light and dark rules
    app.connect("build-finished", _write_print_css, priority=900)
    return {"version": "1.0", "parallel_read_safe": True, "parallel_write_safe": True}
