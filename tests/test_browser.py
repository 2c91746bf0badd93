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
    def log_message(self, *args):  # keep test output clean
        pass


@pytest.fixture(scope="module")
def server():
    if not (SITE / "index.html").is_file():
        _unavailable(f"no built site at {SITE}: run `make book` first")
    handler = functools.partial(_QuietHandler, directory=str(SITE))
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
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
        assert any(h.startswith("https://mybinder.org/v2/gh/") for h in hrefs), "no Binder link"
    finally:
        page.close()


def _repository_url() -> str:
    import sys
    sys.path.insert(0, str(ROOT / "book" / "tools"))
    import bootstrap
    return bootstrap.repository_url()
