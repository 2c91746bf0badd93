"""Browser tests: the built site (_build/html) opened in headless Chromium, offline.

For every page: no request leaves 127.0.0.1 (others are refused and recorded), the console
has no errors, no raw ``$$`` is left untypeset, and every slider changes the visible
picture. Full-page screenshots go to ``_build/screenshots/`` for a person to look at: at
the root, desktop light (``<page>.png``), and in ``desktop-dark/``, ``phone-light/`` and
``phone-dark/`` (390 CSS px wide).

A reader's experience on every screen:

* an axe-core audit (npm, read from node_modules) of every page, light and dark at desktop
  width and dark at phone width: no serious or critical violation;
* dark mode: a live figure has one frame, as a static one;
* the chapter sidebar opens with the book's title in view, on a desktop and in the drawer a
  phone opens it in;
* page weight: no page loads the theme's full FontAwesome (script or fonts), every icon a
  page draws is in the subset fonts the build writes;
* the throttled first view (benchmarks/site.py's phone profile: 4x slower CPU, 9 Mbit/s,
  60 ms): at most 1.5 MB compressed per page and the first slider becomes usable (how soon
  is a budget that `make bench` measures, not a test).

Uses Debian's /usr/bin/chromium through Python playwright (never ``playwright install``).
Under CI (``CI=true``) a missing browser or site is a failure, not a skip.
"""

from __future__ import annotations

import contextlib
import functools
import http.server
import importlib.util
import os
import threading
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SITE = ROOT / "_build" / "html"
SHOTS = ROOT / "_build" / "screenshots"
CHROMIUM = Path(os.environ.get("CHROMIUM", "/usr/bin/chromium"))
FLAGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--disable-quic",
]
IN_CI = os.environ.get("CI", "").lower() in {"1", "true", "yes"}
AXE = ROOT / "node_modules" / "axe-core" / "axe.min.js"
ICONS = SITE / "_static" / "icons"
# Looks a page is opened with: (viewport, colour scheme).
DESKTOP = {"viewport": {"width": 1280, "height": 900}}
PHONE = {
    "viewport": {"width": 390, "height": 844},
    "is_mobile": True,
    "has_touch": True,
    "device_scale_factor": 1,
}
LOOKS = {
    "desktop-light": (DESKTOP, "light"),
    "desktop-dark": (DESKTOP, "dark"),
    "phone-light": (PHONE, "light"),
    "phone-dark": (PHONE, "dark"),
}
# Where each page is audited (and screenshotted, but for desktop-light: the first test's
# root screenshots; and phone-light: test_page_does_not_scroll_sideways_on_a_phone's).
AUDITED = ["desktop-light", "desktop-dark", "phone-dark"]
# What the theme used to load for its icons: nothing may request these any more.
FULL_ICON_ASSETS = ("scripts/fontawesome.js", "vendor/fontawesome/webfonts/", "html-manager/")

pytestmark = pytest.mark.browser


def _unavailable(reason: str):
    if IN_CI:
        pytest.fail(f"{reason} (CI=true: a missing browser or site is a failure)")
    pytest.skip(reason)


def _pages() -> list[str]:
    if not SITE.is_dir():
        return []
    return sorted(
        str(p.relative_to(SITE))
        for p in SITE.rglob("*.html")
        if "_static" not in p.parts and "_sources" not in p.parts
    )


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    """Serves the site as GitHub Pages does: a missing path gets ``404.html`` with status 404."""

    def log_message(self, *args):  # keep test output clean
        pass

    def send_error(self, code, message=None, explain=None):
        page = SITE / "404.html"
        if code != 404 or not page.is_file():
            return super().send_error(code, message, explain)
        body = page.read_bytes()
        self.send_response(404)
        self.send_header("Content-Type", "text/html; charset=utf-8")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)


class _SubPathHandler(_QuietHandler):
    """Serves the site under ``PREFIX`` only, as GitHub Pages serves a project's site under
    ``https://OWNER.github.io/REPO/``: every other path is a 404."""

    PREFIX = "/attention-mechanisms"

    def translate_path(self, path):
        if path != self.PREFIX and not path.startswith(self.PREFIX + "/"):
            return str(SITE / "no-such-file")
        return super().translate_path(path[len(self.PREFIX) :] or "/")


@contextlib.contextmanager
def _serving(handler_class, prefix: str):
    if not (SITE / "index.html").is_file():
        _unavailable(f"no built site at {SITE}: run `make book` first")
    handler = functools.partial(handler_class, directory=str(SITE))
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}{prefix}"
    finally:
        httpd.shutdown()


# Served at the root of 127.0.0.1 and under a sub-path, as project pages are published.
@pytest.fixture(scope="module", params=["root", "sub-path"])
def server(request):
    if request.param == "root":
        with _serving(_QuietHandler, "") as url:
            yield url
    else:
        with _serving(_SubPathHandler, _SubPathHandler.PREFIX) as url:
            yield url


# Served at the root only: for the checks a sub-path cannot change (looks, audit, weight).
@pytest.fixture(scope="module")
def root_server():
    with _serving(_QuietHandler, "") as url:
        yield url


@pytest.fixture(scope="module")
def browser():
    if not CHROMIUM.exists():
        _unavailable(f"{CHROMIUM} not found: apt-get install chromium")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        _unavailable("python playwright is not installed")
    with sync_playwright() as p:
        chromium = p.chromium.launch(executable_path=str(CHROMIUM), args=FLAGS)
        yield chromium
        chromium.close()


def _open(browser, url: str, look: str = "desktop-light"):
    """Open ``url`` as ``look`` (a key of LOOKS); return (page, external requests, console
    errors) once the widgets are rendered and MathJax has typeset the page."""
    options, scheme = LOOKS[look]
    page = browser.new_page(**options, color_scheme=scheme)
    external, errors = [], []

    def route(request_route):
        target = request_route.request.url
        if target.startswith("http://127.0.0.1:") or target.startswith("data:"):
            request_route.continue_()
        else:
            external.append(target)
            request_route.abort()

    page.route("**/*", route)
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.on(
        "response",
        lambda r: errors.append(f"HTTP {r.status}: {r.url}") if r.status >= 400 else None,
    )
    page.on("pageerror", lambda e: errors.append(f"uncaught: {e}"))
    page.goto(url, wait_until="networkidle")
    # The book's widget manager marks the page once every widget is rendered.
    page.wait_for_function(
        "() => !document.querySelector('script[type=\"application/vnd.jupyter.widget-state+json\"]')"
        " || document.documentElement.dataset.widgetsRendered === 'true'",
        timeout=30_000,
    )
    # Deferred scripts have run by now; wait for MathJax 3 to finish typesetting.
    page.evaluate(
        "() => (window.MathJax && MathJax.startup && MathJax.startup.promise)"
        " ? MathJax.startup.promise.then(() => true) : true"
    )
    page.wait_for_timeout(300)
    return page, external, errors


@pytest.mark.parametrize("page_path", _pages() or ["index.html"])
def test_page_offline_clean_and_live(browser, server, page_path):
    page, external, errors = _open(browser, f"{server}/{page_path}")
    try:
        SHOTS.mkdir(parents=True, exist_ok=True)
        if "/attention-mechanisms" in server:
            shot = (
                SHOTS / "sub-path" / (page_path.replace("/", "__").removesuffix(".html") + ".png")
            )
            shot.parent.mkdir(parents=True, exist_ok=True)
        else:
            shot = SHOTS / (page_path.replace("/", "__").removesuffix(".html") + ".png")
        page.screenshot(path=str(shot), full_page=True)

        assert external == [], f"requests left 127.0.0.1: {external}"
        assert errors == [], f"console errors: {errors}"
        text = page.locator("article, main, body").first.inner_text()
        assert "$$" not in text, "raw $$ left in the page: maths was not typeset"

        handles = page.locator(".widget-slider .noUi-handle")
        widget_states = page.locator('script[type="application/vnd.jupyter.widget-view+json"]')
        if widget_states.count():
            assert handles.count() > 0, "the page has widget views but no slider rendered"
        for i in range(handles.count()):
            _assert_slider_changes_picture(page, handles.nth(i), page_path, i)
    finally:
        page.close()


@pytest.mark.parametrize("page_path", [p for p in _pages() if p != "404.html"] or ["index.html"])
def test_page_does_not_scroll_sideways_on_a_phone(browser, server, page_path):
    """At 390 CSS px no page is wider than the screen: long inline code wraps and a wide
    display equation scrolls inside its own box; every figure, static or live, is shown at
    its natural size (wide ones scroll inside their output box), so the label sizes of
    benchmarks/figures.py (at least 9 CSS px) hold. Full-page screenshots (one pixel per CSS
    pixel) go to _build/screenshots/phone-light/."""
    page = browser.new_page(
        viewport={"width": 390, "height": 844},
        is_mobile=True,
        has_touch=True,
        device_scale_factor=2,
    )
    try:
        page.route(
            "**/*",
            lambda r: (
                r.continue_()
                if r.request.url.startswith(("http://127.0.0.1:", "data:"))
                else r.abort()
            ),
        )
        page.goto(f"{server}/{page_path}", wait_until="networkidle")
        page.evaluate(
            "() => (window.MathJax && MathJax.startup && MathJax.startup.promise)"
            " ? MathJax.startup.promise.then(() => true) : true"
        )
        overflow = page.evaluate(
            "() => document.documentElement.scrollWidth - document.documentElement.clientWidth"
        )
        if "/attention-mechanisms" not in server:
            shot = SHOTS / "phone-light" / _shot_name(page_path)
            shot.parent.mkdir(parents=True, exist_ok=True)
            page.screenshot(path=str(shot), full_page=True, scale="css")
        # Wait for the widgets, then measure every figure's displayed width against its own.
        page.wait_for_function(
            "() => !document.querySelector('script[type=\"application/vnd.jupyter.widget-state+json\"]')"
            " || document.documentElement.dataset.widgetsRendered === 'true'",
            timeout=30_000,
        )
        shrunk = page.evaluate(SHRUNK_FIGURES_JS)
        assert overflow <= 0, f"{page_path} scrolls sideways by {overflow} px at 390 px"
        assert shrunk == [], (
            f"{page_path}: figures shown smaller than their natural size at "
            f"390 px, so their labels shrink below 9 px: {shrunk}"
        )
    finally:
        page.close()


# Every figure of the page (static outputs and the visible live frames) with its displayed
# width below its natural width: benchmarks/figures.py's label sizes assume natural size.
# A live frame's natural size is its width attribute (its PNG holds two pixels per CSS pixel).
SHRUNK_FIGURES_JS = """() => [...document.querySelectorAll('.cell_output img')]
  .filter(img => img.getClientRects().length > 0 && img.naturalWidth > 0)
  .map(img => ({alt: (img.alt || '').slice(0, 60),
                natural: img.classList.contains('live-frame')
                  ? Number(img.getAttribute('width')) : img.naturalWidth,
                shown: Math.round(img.getBoundingClientRect().width * 10) / 10}))
  .filter(f => f.shown < f.natural - 0.5)"""


def _assert_slider_changes_picture(page, handle, page_path: str, index: int) -> None:
    figure = handle.locator("xpath=ancestor::div[contains(@class,'widget-vbox')][1]")
    readout = handle.locator(
        "xpath=ancestor::div[contains(@class,'widget-slider')][1]"
        "//div[contains(@class,'widget-readout')]"
    )
    figure.scroll_into_view_if_needed()
    before_png, before_label = figure.screenshot(), readout.inner_text()
    handle.focus()
    page.keyboard.press("End")
    page.wait_for_timeout(150)
    if readout.inner_text() == before_label:  # already at the end: go the other way
        page.keyboard.press("Home")
        page.wait_for_timeout(150)
    after_png, after_label = figure.screenshot(), readout.inner_text()
    where = f"{page_path} slider {index}"
    assert after_label != before_label, f"{where}: the readout did not move"
    assert after_png != before_png, f"{where}: moving the slider did not change the picture"


@pytest.mark.parametrize("missing", ["no-such-page.html", "chapters/99_no_such_chapter.html"])
def test_a_missing_page_gets_the_404_page_and_a_way_home(browser, server, missing):
    page, external, errors = _open(browser, f"{server}/{missing}")
    try:
        assert "Page not found" in page.locator("h1").inner_text()
        assert external == []
        # The only errors: the page's own 404 status, as the network log and console report it.
        assert [e for e in errors if "404" not in e] == [], errors
        home = page.evaluate("() => document.getElementById('home').href")  # absolute
        assert home == f"{server}/index.html"
        page.locator("#home").click()
        page.wait_for_load_state("networkidle")
        assert page.url in (f"{server}/index.html", f"{server}/book/intro.html"), page.url
        assert "Page not found" not in page.title()
    finally:
        page.close()


def test_offline_search_finds_a_chapter(browser, server):
    page, external, errors = _open(browser, f"{server}/search.html?q=softmax")
    try:
        page.wait_for_selector("#search-results li, ul.search li", timeout=15000)
        results = page.locator("#search-results li, ul.search li")
        titles = " ".join(results.all_inner_texts())
        assert results.count() >= 3, f"search for 'softmax' found only: {titles!r}"
        assert "attention" in titles.lower()
        assert external == [] and errors == [], (external, errors)
    finally:
        page.close()


def test_chapter_pages_offer_download_and_launch_links(browser, server):
    page, _, _ = _open(browser, f"{server}/chapters/02_attention_pooling.html")
    try:
        hrefs = page.eval_on_selector_all("a[href]", "els => els.map(e => e.href)")
        assert any(h.endswith("_sources/chapters/02_attention_pooling.ipynb") for h in hrefs), (
            "no download link for the notebook"
        )
        url = _repository_url()
        assert any(
            h.startswith("https://colab.research.google.com/github/")
            and url.removeprefix("https://github.com/") in h
            for h in hrefs
        ), "no Colab link"
        assert not any("mybinder.org" in h for h in hrefs), (
            "a Binder link: Binder is not checked (README, Where it runs)"
        )
    finally:
        page.close()


def _repository_url() -> str:
    import sys

    sys.path.insert(0, str(ROOT / "book" / "tools"))
    import bootstrap

    return bootstrap.repository_url()


# --- Every screen, dark mode, accessibility, page weight, the throttled first view


def _shot_name(page_path: str) -> str:
    return page_path.replace("/", "__").removesuffix(".html") + ".png"


# The boxes (a background or a border) around each live figure's frame, from the <img> up to
# its output area: in dark mode the theme's light box around the image is the only one.
FRAME_BOXES_JS = """() => [...document.querySelectorAll('.widget-subarea img')]
  .filter(img => img.getClientRects().length > 0)
  .map(img => {
    const boxes = [];
    for (let el = img; el; el = el.parentElement) {
      const cs = getComputedStyle(el);
      const bg = cs.backgroundColor;
      const filled = bg !== 'transparent' && !/rgba\\(.*, 0\\)$/.test(bg);
      const bordered = parseFloat(cs.borderTopWidth) > 0 && cs.borderTopStyle !== 'none';
      if (filled || bordered) boxes.push(el.tagName.toLowerCase() + '.' +
                                         [...el.classList].slice(0, 3).join('.'));
      if (el.classList.contains('cell_output') || el.classList.contains('output_area')) break;
    }
    return boxes;
  })"""


AXE_RUN = """async () => {
  const result = await axe.run(document, {resultTypes: ['violations']});
  return result.violations
    .filter(v => v.impact === 'serious' || v.impact === 'critical')
    .flatMap(v => v.nodes.map(n => {
      return {rule: v.id, impact: v.impact, help: v.help, target: n.target.join(' '),
              html: n.html.slice(0, 200)};
    }));
}"""


@pytest.mark.parametrize("look", AUDITED)
@pytest.mark.parametrize("page_path", _pages() or ["index.html"])
def test_page_light_dark_desktop_phone_and_axe_audit(browser, root_server, page_path, look):
    """Every page light and dark at desktop width, and dark at phone width (390 px; light at
    phone width is test_page_does_not_scroll_sideways_on_a_phone); screenshots in
    _build/screenshots/<look>/ (desktop-light: the root ones of
    test_page_offline_clean_and_live).

    * The theme follows the reader's colour scheme and the console stays clean.
    * Dark mode: each live figure has one frame (the theme gives each output image a light
      box; it used to give the widget's area a second one around it).
    * axe-core (npm, pinned in package.json, injected from node_modules: no network), default
      rule set: no serious or critical violation, the sliders and frames included.
    """
    if not AXE.is_file():
        _unavailable(f"{AXE} not found: run `npm ci` (make book)")
    page, external, errors = _open(browser, f"{root_server}/{page_path}", look)
    try:
        if look != "desktop-light":
            shot = SHOTS / look / _shot_name(page_path)
            shot.parent.mkdir(parents=True, exist_ok=True)
            page.screenshot(path=str(shot), full_page=True)
        scheme = LOOKS[look][1]
        assert external == [], f"requests left 127.0.0.1: {external}"
        if page_path != "404.html":  # self-contained, no theme; its own 404 status is logged
            assert errors == [], f"console errors: {errors}"
            assert page.evaluate("() => document.documentElement.dataset.theme") == scheme
        if scheme == "dark":
            for i, boxes in enumerate(page.evaluate(FRAME_BOXES_JS)):
                assert len(boxes) == 1, (
                    f"{page_path}: live figure {i} has {len(boxes)} frames in dark mode: {boxes}"
                )
        page.add_script_tag(path=str(AXE))
        found = page.evaluate(AXE_RUN)
    finally:
        page.close()
    assert not found, f"{page_path} ({look}): serious or critical violations:\n" + "\n".join(
        f"  {v['impact']} {v['rule']} ({v['help']}): {v['target']}: {v['html']}" for v in found
    )


TITLE_IN_VIEW_JS = """(container) => {
  const box = document.querySelector(container);
  const title = box && box.querySelector('.navbar-brand .logo__title, .navbar-brand');
  if (!title || !title.getClientRects().length) return {found: false};
  const r = title.getBoundingClientRect(), b = box.getBoundingClientRect();
  const x = (r.left + r.right) / 2, y = (r.top + r.bottom) / 2;
  const hit = document.elementFromPoint(x, y);
  return {found: true, text: title.textContent.trim(), top: r.top, bottom: r.bottom,
          boxTop: Math.max(b.top, 0), boxBottom: Math.min(b.bottom, innerHeight),
          onTop: !!hit && (title.contains(hit) || hit.contains(title))};
}"""


@pytest.mark.parametrize("look", ["desktop-light", "phone-light"])
@pytest.mark.parametrize(
    "page_path",
    [p for p in _pages() if p.startswith("chapters/")] or ["chapters/01_mlp_and_activations.html"],
)
def test_chapter_sidebar_opens_with_the_book_title_in_view(browser, root_server, page_path, look):
    """The theme scrolls the sidebar to the current chapter, which hid the book's title; on a
    phone its button did not open the drawer at all. Now the title is in view, on top of
    what is around it: in the sidebar on a desktop, in the drawer the button opens on a
    phone."""
    page, _, errors = _open(browser, f"{root_server}/{page_path}", look)
    try:
        container = "#pst-primary-sidebar"
        if look.startswith("phone"):
            page.locator(".primary-toggle:visible").first.click()
            page.wait_for_selector("#pst-primary-sidebar-modal[open]", timeout=5000)
            page.wait_for_timeout(300)
            container = "#pst-primary-sidebar-modal"
        title = page.evaluate(TITLE_IN_VIEW_JS, container)
        shot = SHOTS / "sidebar" / f"{look}-{_shot_name(page_path)}"
        shot.parent.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(shot))
        assert title["found"], f"{page_path}: no book title in {container}"
        assert title["text"] == "Attention Mechanisms"
        assert title["boxTop"] - 1 <= title["top"] and title["bottom"] <= title["boxBottom"] + 1, (
            f"{page_path} ({look}): the title is out of view: {title}"
        )
        assert title["onTop"], f"{page_path} ({look}): the title is covered: {title}"
        assert errors == [], errors
    finally:
        page.close()


FONT_AWESOME_GLYPHS_JS = """() => {
  const out = [];
  for (const el of document.querySelectorAll('*')) {
    for (const pseudo of [null, '::before', '::after']) {
      const cs = getComputedStyle(el, pseudo);
      if (!/awesome/i.test(cs.fontFamily)) continue;
      let text;
      if (pseudo) {
        const m = /^"(.*)"$/.exec(cs.content);
        if (!m) continue;
        text = m[1];
      } else {
        text = [...el.childNodes].filter(n => n.nodeType === 3).map(n => n.data).join('');
      }
      if (!text.trim()) continue;
      out.push({family: cs.fontFamily, weight: cs.fontWeight, text,
                where: el.tagName.toLowerCase() + '.' + [...el.classList].join('.') + (pseudo || '')});
    }
  }
  return out;
}"""


def _subset_cmaps() -> dict[str, set[int]]:
    from fontTools.ttLib import TTFont

    names = {
        "solid": "fa-solid-900.woff",
        "regular": "fa-regular-400.woff",
        "brands": "fa-brands-400.woff",
    }
    missing = [n for n in names.values() if not (ICONS / n).is_file()]
    assert not missing, f"the build wrote no subset icon fonts {missing} to {ICONS}"
    return {style: set(TTFont(ICONS / name).getBestCmap()) for style, name in names.items()}


@pytest.mark.parametrize("page_path", _pages() or ["index.html"])
def test_page_loads_no_full_icon_font_and_its_icons_are_in_the_subset(
    browser, root_server, page_path
):
    """Page weight: the theme's fontawesome.js (1.5 MB) and full FontAwesome fonts, and the old
    widget manager's, are never requested; every icon the page can draw (hidden ones too) is
    a glyph of the subset fonts the build writes (else the browser would fetch the full
    font)."""
    requested = []
    options, scheme = LOOKS["desktop-light"]
    page = browser.new_page(**options, color_scheme=scheme)
    try:
        page.route(
            "**/*",
            lambda r: (
                r.continue_()
                if r.request.url.startswith(("http://127.0.0.1:", "data:"))
                else r.abort()
            ),
        )
        page.on("request", lambda r: requested.append(r.url))
        page.goto(f"{root_server}/{page_path}", wait_until="networkidle")
        glyphs = page.evaluate(FONT_AWESOME_GLYPHS_JS)
    finally:
        page.close()
    heavy = [u for u in requested if any(a in u for a in FULL_ICON_ASSETS)]
    assert heavy == [], f"{page_path} loads the full icon assets: {heavy}"
    cmaps = _subset_cmaps()
    missing = []
    for g in glyphs:
        style = (
            "brands"
            if "Brands" in g["family"]
            else "solid"
            if int(g["weight"]) >= 600
            else "regular"
        )
        missing += [
            f"{g['where']}: U+{ord(c):04X} ({style})"
            for c in g["text"]
            if not c.isspace() and ord(c) not in cmaps[style]
        ]
    assert not missing, f"{page_path} draws icons the subset fonts lack: {missing}"


def _site_benchmark():
    spec = importlib.util.spec_from_file_location("bench_site", ROOT / "benchmarks" / "site.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def throttled(browser):
    """benchmarks/site.py's server (text gzipped, as GitHub Pages) and a Chromium that
    resolves no host but 127.0.0.1."""
    if not (SITE / "index.html").is_file():
        _unavailable(f"no built site at {SITE}: run `make book` first")
    bench = _site_benchmark()
    server = bench.serve(SITE)
    chromium = browser.browser_type.launch(executable_path=str(CHROMIUM), args=bench.CHROMIUM_ARGS)
    yield bench, chromium, f"http://127.0.0.1:{server.server_port}"
    chromium.close()
    server.shutdown()


def _benchmarked_pages() -> list[str]:
    if not SITE.is_dir():
        return []
    bench = _site_benchmark()
    return [p.relative_to(SITE).as_posix() for p in bench.html_pages(SITE)]


@pytest.mark.parametrize("page_path", _benchmarked_pages() or ["index.html"])
def test_throttled_phone_first_view(throttled, page_path):
    """The throttled phone of benchmarks/site.py (390x844, CPU 4x slower, 9 Mbit/s, 60 ms):
    at most 1.5 MB compressed (exact: bytes, not time), nothing requested beyond 127.0.0.1,
    and on a page with live figures the first slider becomes usable (handle in the page, its
    picture decoded). How *soon* it does is a budget, measured by `make bench`
    (benchmarks/site.py), never asserted here: a busy test machine must not fail the tests."""
    bench, chromium, base = throttled
    r = bench.measure_page(chromium, base, page_path, "phone", latency=False)
    assert r["refused"] == [], f"requests left 127.0.0.1: {r['refused']}"
    assert r["transfer"] <= bench.TRANSFER_BUDGET, (
        f"{page_path}: {r['transfer'] / 1e6:.3f} MB compressed > "
        f"{bench.TRANSFER_BUDGET / 1e6:.1f} MB; largest: "
        + ", ".join(f"{x['url']} {x['wire'] / 1e3:.0f} kB" for x in r["resources"][:5])
    )
    if r["has_widgets"]:
        assert r["first_slider_ms"] is not None, (
            f"{page_path}: no slider became usable (handle shown, picture decoded)"
        )
