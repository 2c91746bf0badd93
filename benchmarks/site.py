"""Page weight and slider latency of the built site, measured in Chromium.

    python benchmarks/site.py [--site _build/html] [--json figures.json]

What is measured, and how:

* Page weight, for every HTML page of the site (``_static/`` and redirect stubs skipped):
  the HTML file's size on disk (it embeds the widget state, every frame as base64) and the
  total bytes of every resource the page loads when opened in Chromium, counted from the
  response bodies playwright sees. Each page opens in a fresh browser context (cold
  cache). The site is served by a threaded ``http.server`` on 127.0.0.1 at a free port;
  any request to another host is refused and counted. Budget: HTML under 2.5 MB.
* Compressed weight: what a reader downloads, as GitHub Pages serves the site: text
  resources (HTML, JS, CSS, JSON, SVG, fonts other than WOFF2) gzip-compressed at level 6,
  images and WOFF2 fonts as they are. Computed from the same response bodies.
* First paint and first usable slider: the browser's first-contentful-paint time, and the
  time from navigation start until the first slider's handle is in the page and the
  picture beside it is decoded (an init script checks once per animation frame). A page
  without sliders reports none.
* Slider latency, for every page with sliders (``.widget-slider`` holding a
  ``.noUi-handle``): the handle is focused and moved with ArrowRight (ArrowLeft once at the
  end) at least 10 times. In the page, a capture-phase ``keydown`` listener stamps
  ``performance.now()``; a requestAnimationFrame loop then watches the widget's output area
  for a change of its visible frame (the set of visible ``<img>`` sources: ipywidgets 8's
  Stack swaps the selected child's view in and out) and stamps the first animation-frame
  callback at which the new frame is in the DOM and decoded, i.e. the paint that shows it.
  A MutationObserver also stamps when the DOM first changed. Budget: 16 ms (one display
  frame at 60 Hz). Median and max are reported per slider.

Prints a table with budgets and OK / OVER BUDGET; always exits 0 unless the site is missing.
"""

from __future__ import annotations

import argparse
import gzip
import functools
import http.server
import json
import statistics
import sys
import threading
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PAGE_BUDGET = 2.5e6  # bytes of HTML per page
LATENCY_BUDGET = 16.0  # ms, slider move to new frame painted
MOVES = 12  # per slider (>= 10)
# Content types GitHub Pages sends gzip-compressed (it leaves PNG, JPEG and WOFF2 alone).
COMPRESSED_TYPES = ("text/", "application/javascript", "application/json", "image/svg",
                    "application/x-font-ttf", "font/ttf", "application/vnd.ms-fontobject",
                    "font/otf", "application/font-woff", "font/woff")
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run"]

# Runs before the page's own scripts: stamps the first animation frame at which a slider
# handle exists and the picture in its figure is decoded.
FIRST_SLIDER_JS = """
(() => {
  const tick = () => {
    const handle = document.querySelector('.widget-slider .noUi-handle');
    const box = handle && handle.closest('.widget-vbox, .widget-box');
    const imgs = box ? [...box.querySelectorAll('img')]
        .filter(im => im.getClientRects().length > 0) : [];
    if (imgs.length && imgs.every(im => im.complete && im.naturalWidth > 0)) {
      window.__firstSlider = performance.now();
      return;
    }
    if (performance.now() < 60000) requestAnimationFrame(tick);
  };
  requestAnimationFrame(tick);
})();
"""

# Installed in every page: stamps key presses, watches the output area of slider `i`.
WATCH_JS = """
([i, key]) => { window.__bench = new Promise(resolve => {
  const slider = document.querySelectorAll('.widget-slider')[i];
  const area = slider.closest('.widget-subarea, .cell_output, .output') || document.body;
  const frame = () => [...area.querySelectorAll('img')]
      .filter(im => !slider.contains(im) && im.getClientRects().length > 0);
  const sig = () => frame().map(im => im.src).join('|');
  const before = sig();
  const r = {key: null, dom: null, load: null, paint: null, blank: false};
  const loaded = () => { if (r.load === null) r.load = performance.now(); };
  const onKey = () => { r.key = performance.now(); };
  window.addEventListener('keydown', onKey, {capture: true, once: true});
  const ready = imgs => imgs.length && imgs.every(im => im.complete && im.naturalWidth > 0);
  const mo = new MutationObserver(() => {  // stamps when the new frame's <img> is in the DOM
    const imgs = frame();
    if (r.dom !== null || !imgs.length || sig() === before) return;
    r.dom = performance.now();
    const waiting = imgs.filter(im => !(im.complete && im.naturalWidth > 0));
    if (!waiting.length) loaded();
    waiting.forEach(im => im.addEventListener('load', loaded, {once: true}));
  });
  mo.observe(area, {childList: true, subtree: true, attributes: true,
                    attributeFilter: ['src', 'style', 'class', 'hidden']});
  const deadline = performance.now() + 3000;
  const tick = () => {  // one call per animation frame, just before it is painted
    const now = performance.now();
    const imgs = frame();
    if (r.key !== null && sig() !== before) {
      if (ready(imgs)) { r.paint = now; mo.disconnect(); resolve(r); return; }
      r.blank = true;  // this frame paints no picture: the old one is gone, the new not decoded
    }
    if (now > deadline) { mo.disconnect(); resolve(r); return; }
    requestAnimationFrame(tick);
  };
  requestAnimationFrame(tick);
}); }
"""


class QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):  # keep the report readable
        pass


def serve(site: Path) -> http.server.ThreadingHTTPServer:
    handler = functools.partial(QuietHandler, directory=str(site))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def html_pages(site: Path) -> list[Path]:
    pages = []
    for path in sorted(site.rglob("*.html")):
        rel = path.relative_to(site)
        if rel.parts[0] in ("_static", "_sources", "_images"):
            continue
        head = path.read_text(errors="replace")[:2000].lower()
        if 'http-equiv="refresh"' in head and path.stat().st_size < 2000:
            continue  # a redirect stub (index.html)
        pages.append(path)
    return pages


def measure_page(browser, base: str, rel: str) -> dict:
    context = browser.new_context(viewport={"width": 1200, "height": 900})
    page = context.new_page()
    refused, sizes, compressed, errors = [], {}, {}, []

    def route(r):
        if r.request.url.startswith("http://127.0.0.1"):
            r.continue_()
        else:
            refused.append(r.request.url)
            r.abort()

    def on_finished(request):
        try:
            sizes[request.url] = request.sizes()["responseBodySize"]
            response = request.response()
            body = response.body() if response else b""
            kind = (response.headers.get("content-type", "") if response else "").lower()
            compressed[request.url] = (len(gzip.compress(body, compresslevel=6))
                                       if kind.startswith(COMPRESSED_TYPES) else len(body))
        except Exception:  # the page was closed while a request finished
            pass

    page.route("**/*", route)
    page.add_init_script(FIRST_SLIDER_JS)
    page.on("requestfinished", on_finished)
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.goto(f"{base}/{rel}", wait_until="networkidle")
    page.wait_for_timeout(500)  # let the widget manager render
    has_slider = page.locator(".widget-slider .noUi-handle").count() > 0
    if has_slider:
        page.wait_for_function("() => window.__firstSlider !== undefined", timeout=60_000)
    first_slider = page.evaluate("() => window.__firstSlider ?? null") if has_slider else None
    first_paint = page.evaluate(
        "() => (performance.getEntriesByName('first-contentful-paint')[0] || {}).startTime"
        " ?? null")
    sliders = page.evaluate(
        "() => [...document.querySelectorAll('.widget-slider')]"
        ".map(s => !!s.querySelector('.noUi-handle'))")
    result = {"page": rel, "requests": len(sizes), "transferred": sum(sizes.values()),
              "compressed": sum(compressed.values()), "first_paint_ms": first_paint,
              "first_slider_ms": first_slider,
              "refused": refused, "page_errors": errors, "sliders": []}
    for i, has_handle in enumerate(sliders):
        if has_handle:
            result["sliders"].append(measure_slider(page, i))
    context.close()
    return result


def measure_slider(page, i: int) -> dict:
    handle = page.locator(".widget-slider").nth(i).locator(".noUi-handle").first
    label = page.locator(".widget-slider").nth(i).locator(".widget-label").first
    name = label.inner_text() if label.count() else f"slider {i}"
    handle.scroll_into_view_if_needed()
    handle.focus()
    paint, dom, load, missed, blank = [], [], [], 0, 0
    for _ in range(MOVES):
        now = float(handle.get_attribute("aria-valuenow") or 0)
        top = float(handle.get_attribute("aria-valuemax") or 0)
        if top == float(handle.get_attribute("aria-valuemin") or 0):
            break  # a one-frame slider cannot move
        key = "ArrowLeft" if now >= top else "ArrowRight"
        page.evaluate(WATCH_JS, [i, key])  # installs the watcher, returns at once
        page.keyboard.press(key)
        r = page.evaluate("() => window.__bench")
        if r["paint"] is None or r["key"] is None:
            missed += 1
            if missed >= 3 and not paint:
                break  # this slider changes no picture: do not wait 3 s per move
            continue
        paint.append(r["paint"] - r["key"])
        blank += bool(r["blank"])
        if r["dom"] is not None:
            dom.append(r["dom"] - r["key"])
        if r["load"] is not None:
            load.append(r["load"] - r["key"])
        page.wait_for_timeout(50)
    return {"slider": name, "moves": len(paint), "missed": missed, "blank_paints": blank,
            "median_ms": statistics.median(paint) if paint else None,
            "max_ms": max(paint) if paint else None,
            "dom_median_ms": statistics.median(dom) if dom else None,
            "load_median_ms": statistics.median(load) if load else None,
            "samples_ms": [round(x, 2) for x in paint]}


def verdict(ok: bool) -> str:
    return "OK" if ok else "OVER BUDGET"


def report(results: list[dict]) -> None:
    print(f"\nPage weight (budget: HTML under {PAGE_BUDGET / 1e6:.1f} MB per page)")
    print("  loaded: every response body; gzip: the same as Pages sends it (text gzipped);")
    print("  paint: first contentful paint; slider: navigation to first slider usable")
    print(f"{'page':44} {'HTML':>10} {'loaded':>10} {'gzip':>10} {'requests':>8} "
          f"{'refused':>7} {'paint':>8} {'slider':>8}  verdict")
    for r in results:
        ok = r["html_bytes"] <= PAGE_BUDGET
        paint = f"{r['first_paint_ms']:6.0f}ms" if r["first_paint_ms"] is not None else "       -"
        slider = (f"{r['first_slider_ms']:6.0f}ms" if r["first_slider_ms"] is not None
                  else "       -")
        print(f"{r['page']:44} {r['html_bytes'] / 1e6:8.3f}MB {r['transferred'] / 1e6:8.3f}MB"
              f" {r['compressed'] / 1e6:8.3f}MB {r['requests']:8d} {len(r['refused']):7d}"
              f" {paint} {slider}  {verdict(ok)}")
        for url in r["refused"]:
            print(f"    refused non-local request: {url}")
        for err in r["page_errors"]:
            print(f"    page error: {err}")
    rows = [(r["page"], s) for r in results for s in r["sliders"]]
    print(f"\nSlider move -> new frame painted (budget {LATENCY_BUDGET:.0f} ms, "
          f"{MOVES} moves per slider)")
    if not rows:
        print("  (no page with sliders)")
    for page, s in rows:
        if not s["moves"]:
            print(f"  {page} [{s['slider']}]: no frame change seen ({s['missed']} missed)"
                  "  OVER BUDGET")
            continue
        ok = s["max_ms"] <= LATENCY_BUDGET and not s["missed"]
        print(f"  {page} [{s['slider']}]: median {s['median_ms']:.1f} ms, max "
              f"{s['max_ms']:.1f} ms over {s['moves']} moves, {s['missed']} missed  {verdict(ok)}")
        print(f"      median: new <img> in DOM {s['dom_median_ms'] or 0:.1f} ms, decoded "
              f"{s['load_median_ms'] or 0:.1f} ms; {s['blank_paints']} moves painted a blank "
              "frame before the new one")
    over = [r["page"] for r in results if r["html_bytes"] > PAGE_BUDGET]
    over += [f"{p} [{s['slider']}]" for p, s in rows
             if not s["moves"] or s["max_ms"] > LATENCY_BUDGET or s["missed"]]
    refused = sum(len(r["refused"]) for r in results)
    print(f"\nSummary: {len(results)} pages, {len(rows)} sliders, {refused} refused requests, "
          + (f"OVER BUDGET: {', '.join(over)}" if over else "all within budget"))


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--site", type=Path, default=ROOT / "_build" / "html")
    parser.add_argument("--json", type=Path, help="also write the figures to this JSON file")
    args = parser.parse_args(argv)
    site = args.site.resolve()
    if not (site / "index.html").is_file():
        print(f"error: no built site in {site}: run make book first", file=sys.stderr)
        return 1
    pages = html_pages(site)
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        print("error: playwright is not installed: run make book first (it installs the venv)",
              file=sys.stderr)
        return 1
    server = serve(site)
    base = f"http://127.0.0.1:{server.server_port}"
    print(f"Serving {site} at {base}; {len(pages)} pages")
    results = []
    try:
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path="/usr/bin/chromium", args=CHROMIUM_ARGS)
            for path in pages:
                rel = path.relative_to(site).as_posix()
                r = measure_page(browser, base, rel)
                r["html_bytes"] = path.stat().st_size
                results.append(r)
            browser.close()
    finally:
        server.shutdown()
    report(results)
    if args.json:
        args.json.write_text(json.dumps({"page_budget_bytes": PAGE_BUDGET,
                                         "latency_budget_ms": LATENCY_BUDGET,
                                         "pages": results}, indent=2))
        print(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
