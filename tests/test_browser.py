"""Browser tests: the built site (_build/html) opened in headless Chromium, offline.

For every page: no request leaves 127.0.0.1 (others are refused and recorded), the console
has no errors, no raw ``$$`` is left untypeset, and every slider changes the visible
picture. Full-page screenshots go to ``_build/screenshots/`` for a person to look at.

Uses Debian's /usr/bin/chromium through Python playwright (never ``playwright install``).
Under CI (``CI=true``) a missing browser or site is a failure, not a skip.
"""

from __future__ import annotations

import functools
import http.server
import os
import threading
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SITE = ROOT / "_build" / "html"
SHOTS = ROOT / "_build" / "screenshots"
CHROMIUM = Path(os.environ.get("CHROMIUM", "/usr/bin/chromium"))
FLAGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--no-first-run", "--disable-quic"]
IN_CI = os.environ.get("CI", "").lower() in {"1", "true", "yes"}

pytestmark = pytest.mark.browser


def _unavailable(reason: str):
    if IN_CI:
        pytest.fail(f"{reason} (CI=true: a missing browser or site is a failure)")
    pytest.skip(reason)


def _pages() -> list[str]:
    if not SITE.is_dir():
        return []
    return sorted(str(p.relative_to(SITE)) for p in SITE.rglob("*.html")
                  if "_static" not in p.parts and "_sources" not in p.parts)


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
        return super().translate_path(path[len(self.PREFIX):] or "/")


# Served at the root of 127.0.0.1 and under a sub-path, as project pages are published.
@pytest.fixture(scope="module", params=["root", "sub-path"])
def server(request):
    if not (SITE / "index.html").is_file():
        _unavailable(f"no built site at {SITE}: run `make book` first")
    handler_class = _QuietHandler if request.param == "root" else _SubPathHandler
    prefix = "" if request.param == "root" else _SubPathHandler.PREFIX
    handler = functools.partial(handler_class, directory=str(SITE))
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}{prefix}"
    httpd.shutdown()


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


def _open(browser, url: str):
    """Open ``url``; return (page, external requests, console errors)."""
    page = browser.new_page(viewport={"width": 1280, "height": 900})
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
    page.on("response", lambda r: errors.append(f"HTTP {r.status}: {r.url}")
            if r.status >= 400 else None)
    page.on("pageerror", lambda e: errors.append(f"uncaught: {e}"))
    page.goto(url, wait_until="networkidle")
    # Deferred scripts have run by now; wait for MathJax 3 to finish typesetting.
    page.evaluate("() => (window.MathJax && MathJax.startup && MathJax.startup.promise)"
                  " ? MathJax.startup.promise.then(() => true) : true")
    page.wait_for_timeout(300)
    return page, external, errors


@pytest.mark.parametrize("page_path", _pages() or ["index.html"])
def test_page_offline_clean_and_live(browser, server, page_path):
    page, external, errors = _open(browser, f"{server}/{page_path}")
    try:
        SHOTS.mkdir(parents=True, exist_ok=True)
        if "/attention-mechanisms" in server:
            shot = SHOTS / "sub-path" / (page_path.replace("/", "__").removesuffix(".html") + ".png")
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
    display equation scrolls inside its own box."""
    page = browser.new_page(viewport={"width": 390, "height": 844}, is_mobile=True,
                            has_touch=True, device_scale_factor=2)
    try:
        page.route("**/*", lambda r: r.continue_() if r.request.url.startswith(
            ("http://127.0.0.1:", "data:")) else r.abort())
        page.goto(f"{server}/{page_path}", wait_until="networkidle")
        page.evaluate("() => (window.MathJax && MathJax.startup && MathJax.startup.promise)"
                      " ? MathJax.startup.promise.then(() => true) : true")
        overflow = page.evaluate("() => document.documentElement.scrollWidth"
                                 " - document.documentElement.clientWidth")
        assert overflow <= 0, f"{page_path} scrolls sideways by {overflow} px at 390 px"
    finally:
        page.close()


def _assert_slider_changes_picture(page, handle, page_path: str, index: int) -> None:
    figure = handle.locator("xpath=ancestor::div[contains(@class,'widget-vbox')][1]")
    readout = handle.locator(
        "xpath=ancestor::div[contains(@class,'widget-slider')][1]"
        "//div[contains(@class,'widget-readout')]")
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
            "no download link for the notebook")
        url = _repository_url()
        assert any(h.startswith("https://colab.research.google.com/github/") and
                   url.removeprefix("https://github.com/") in h for h in hrefs), "no Colab link"
        assert not any("mybinder.org" in h for h in hrefs), (
            "a Binder link: Binder is not checked (README, Where it runs)")
    finally:
        page.close()


def _repository_url() -> str:
    import sys
    sys.path.insert(0, str(ROOT / "book" / "tools"))
    import bootstrap
    return bootstrap.repository_url()
