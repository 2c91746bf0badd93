"""Regenerate the README's screenshot: a live heatmap of the built site, after a slider move.

python book/tools/readme_screenshot.py [page] [slider-number] [steps-from-start]   # needs make book first
"""

from __future__ import annotations

import functools
import http.server
import sys
import threading
from pathlib import Path

from playwright.sync_api import sync_playwright

ROOT = Path(__file__).resolve().parents[2]
SITE = ROOT / "_build" / "html"
OUT = ROOT / "book" / "images" / "live-heatmap.png"
FLAGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


def main(argv: list[str]) -> int:
    page_path = argv[0] if argv else "chapters/02_attention_pooling.html"
    index = int(argv[1]) if len(argv) > 1 else 0
    steps = int(argv[2]) if len(argv) > 2 else 2
    handler = functools.partial(_Quiet, directory=str(SITE))
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path="/usr/bin/chromium", args=FLAGS)
        page = browser.new_page(viewport={"width": 1100, "height": 900}, device_scale_factor=1)
        page.route(
            "**/*",
            lambda r: r.continue_() if r.request.url.startswith("http://127.0.0.1") else r.abort(),
        )
        page.goto(
            f"http://127.0.0.1:{httpd.server_address[1]}/{page_path}", wait_until="networkidle"
        )
        handle = page.locator(".widget-slider .noUi-handle").nth(index)
        handle.focus()
        page.keyboard.press("Home")
        for _ in range(steps):
            page.keyboard.press("ArrowRight")
        figure = handle.locator("xpath=ancestor::div[contains(@class,'widget-vbox')][1]")
        figure.scroll_into_view_if_needed()
        page.wait_for_timeout(200)
        OUT.parent.mkdir(parents=True, exist_ok=True)
        figure.screenshot(path=str(OUT))
        browser.close()
    httpd.shutdown()
    print(f"wrote {OUT.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
