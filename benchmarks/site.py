"""Page weight, first view and slider latency of the built site, measured in Chromium.

    python benchmarks/site.py [--site _build/html] [--only phone|desktop] [--pages GLOB]
                              [--detail] [--json figures.json]

The site is served as GitHub Pages serves it: by a threaded ``http.server`` on 127.0.0.1 at
a free port that gzip-compresses text (HTML, JS, CSS, JSON, SVG, TTF/EOT/WOFF fonts; PNG,
JPEG and WOFF2 go as they are) when the browser accepts it. Chromium resolves every host but
127.0.0.1 to nothing (``--host-resolver-rules``), so a request leaving the machine fails;
each one is recorded and counted as a missed budget. Every page opens in a fresh browser
context (cold cache). Pages: every HTML page of the site (``_static/``, ``_sources/`` and
redirect stubs skipped).

Two profiles:

* **phone** (throttled; a mid-range phone): viewport 390 x 844 CSS
  px at device pixel ratio 3, touch; through the Chrome DevTools Protocol the CPU is slowed
  4x (``Emulation.setCPUThrottlingRate``) and the network limited to 9 Mbit/s down,
  1.5 Mbit/s up with 60 ms latency (``Network.emulateNetworkConditions``). Per page:
  - *transfer*: bytes on the wire (CDP ``encodedDataLength``: compressed bodies plus
    headers) of every request the page makes until the network is idle, and the same
    bodies uncompressed. Budget: at most 1.5 MB compressed.
  - *first paint*: the browser's first-contentful-paint time.
  - *first usable slider*: time from navigation start to the first animation frame at which
    the first slider's handle is in the page AND the picture in its figure is decoded (an
    init script checks once per animation frame). Budget: at most 5 s. Pages without a
    slider report none.
* **desktop** (unthrottled, 1200 x 900): the same figures, plus slider latency for every
  slider (``.widget-slider`` holding a ``.noUi-handle``), moved at least 10 times by
  keyboard (ArrowRight, ArrowLeft at the end) and 10 times by mouse (a click on the track
  at the next value's position). In the page, a capture-phase ``keydown`` / ``pointerdown``
  listener stamps ``performance.now()``; a requestAnimationFrame loop watches the widget's
  output area for a change of its visible frame (the set of visible ``<img>`` sources) and
  stamps the first animation-frame callback at which the new frame is in the DOM and
  decoded, i.e. the paint that shows it. Budget: a median of 16 ms (one display frame at
  60 Hz) per slider, by keyboard and by mouse.

Also reported per page, from the HTML file: its size (budget: under 2.5 MB) and
how much of it is saved widget state (the ``application/vnd.jupyter.widget-state+json``
script) against the rest, raw and gzipped. ``--detail`` lists each page's resources.

Prints one line per page and per slider with its verdict (OK / OVER BUDGET) and a summary.
Exits 1 when any budget it prints is missed or a request left 127.0.0.1, 2 on a usage
error or a missing site, 0 when everything is within budget.
"""

from __future__ import annotations

import argparse
import fnmatch
import functools
import gzip
import http.server
import io
import json
import re
import statistics
import sys
import threading
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
HTML_BUDGET = 2.5e6  # bytes of HTML per page
TRANSFER_BUDGET = 1.5e6  # compressed bytes a page downloads, throttled phone
FIRST_SLIDER_BUDGET = 5000.0  # ms, navigation to first usable slider, throttled phone
LATENCY_BUDGET = 16.0  # ms, median slider move to new frame painted (one display frame)
MOVES = 12  # per slider and input device (>= 10)

# The throttled phone: 4x slower CPU, 9 Mbit/s down, 1.5 Mbit/s up, 60 ms round trip.
PHONE = {
    "viewport": {"width": 390, "height": 844},
    "device_scale_factor": 3,
    "is_mobile": True,
    "has_touch": True,
}
CPU_SLOWDOWN = 4
NETWORK = {
    "offline": False,
    "latency": 60,
    "downloadThroughput": 9e6 / 8,
    "uploadThroughput": 1.5e6 / 8,
}
DESKTOP = {"viewport": {"width": 1200, "height": 900}}

# Content types GitHub Pages sends gzip-compressed (it leaves PNG, JPEG and WOFF2 alone).
COMPRESSED_TYPES = (
    "text/",
    "application/javascript",
    "application/json",
    "image/svg",
    "application/x-font-ttf",
    "font/ttf",
    "application/vnd.ms-fontobject",
    "font/otf",
    "application/font-woff",
    "font/woff",
)
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--disable-quic",
    # Every host but 127.0.0.1 resolves to nothing: the site must stay offline.
    "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1",
]
WIDGET_STATE = re.compile(
    rb'<script type="application/vnd.jupyter.widget-state\+json">(.*?)</script>', re.S
)

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
    if (performance.now() < 120000) requestAnimationFrame(tick);
  };
  requestAnimationFrame(tick);
})();
"""

# Installed before each move: stamps the input event, watches the output area of slider `i`.
WATCH_JS = """
([i, kind]) => { window.__bench = new Promise(resolve => {
  const slider = document.querySelectorAll('.widget-slider')[i];
  const area = slider.closest('.widget-subarea, .cell_output, .output') || document.body;
  const frame = () => [...area.querySelectorAll('img')]
      .filter(im => !slider.contains(im) && im.getClientRects().length > 0);
  const sig = () => frame().map(im => im.src).join('|');
  const before = sig();
  const r = {key: null, dom: null, load: null, paint: null, blank: false};
  const loaded = () => { if (r.load === null) r.load = performance.now(); };
  const onInput = () => { r.key = performance.now(); };
  window.addEventListener(kind === 'mouse' ? 'pointerdown' : 'keydown', onInput,
                          {capture: true, once: true});
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


class PagesHandler(http.server.SimpleHTTPRequestHandler):
    """Serves files as GitHub Pages does: text gzip-compressed when the browser accepts it."""

    _cache: dict = {}
    _lock = threading.Lock()

    def log_message(self, *args):  # keep the report readable
        pass

    def end_headers(self):
        self.send_header("Cache-Control", "max-age=600")
        super().end_headers()

    def send_head(self):
        path = Path(self.translate_path(self.path))
        if path.is_dir():
            path = path / "index.html"
        kind = self.guess_type(str(path))
        if (
            not path.is_file()
            or "gzip" not in self.headers.get("Accept-Encoding", "")
            or not kind.startswith(COMPRESSED_TYPES)
        ):
            return super().send_head()
        key = (path, path.stat().st_mtime_ns)
        with self._lock:
            body = self._cache.get(key)
            if body is None:
                body = self._cache[key] = gzip.compress(path.read_bytes(), compresslevel=6)
        self.send_response(200)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Encoding", "gzip")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        return io.BytesIO(body)


def serve(site: Path) -> http.server.ThreadingHTTPServer:
    handler = functools.partial(PagesHandler, directory=str(site))
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


def html_composition(path: Path) -> dict:
    """Bytes of the page's saved widget state against the rest of its HTML, raw and gzipped."""
    html = path.read_bytes()
    state = b"".join(m.group(1) for m in WIDGET_STATE.finditer(html))
    rest = WIDGET_STATE.sub(b"", html)
    return {
        "html_bytes": len(html),
        "html_gzip": len(gzip.compress(html, 6)),
        "state_bytes": len(state),
        "state_gzip": len(gzip.compress(state, 6)) if state else 0,
        "rest_bytes": len(rest),
        "rest_gzip": len(gzip.compress(rest, 6)),
    }


def measure_page(
    browser, base: str, rel: str, profile: str, latency: bool, throttle: bool = True
) -> dict:
    """One opening of ``rel`` as ``profile`` ("phone": throttled unless ``throttle`` is False,
    which changes only the timings, not the bytes or what becomes usable)."""
    options = PHONE if profile == "phone" else DESKTOP
    context = browser.new_context(**options)
    page = context.new_page()
    cdp = context.new_cdp_session(page)
    cdp.send("Network.enable")
    if profile == "phone" and throttle:
        cdp.send("Network.emulateNetworkConditions", NETWORK)
        cdp.send("Emulation.setCPUThrottlingRate", {"rate": CPU_SLOWDOWN})
    urls, wire, body, refused, errors = {}, {}, {}, [], []

    def on_response(event):
        urls[event["requestId"]] = (event["response"]["url"], event["response"].get("mimeType", ""))

    def on_data(event):
        body[event["requestId"]] = body.get(event["requestId"], 0) + event["dataLength"]

    def on_finished(event):
        wire[event["requestId"]] = event["encodedDataLength"]

    def on_failed(event):
        url = requested.get(event["requestId"], "?")
        if not url.startswith(("http://127.0.0.1", "data:", "blob:")):
            refused.append(url)

    requested = {}
    cdp.on(
        "Network.requestWillBeSent",
        lambda e: requested.__setitem__(e["requestId"], e["request"]["url"]),
    )
    cdp.on("Network.responseReceived", on_response)
    cdp.on("Network.dataReceived", on_data)
    cdp.on("Network.loadingFinished", on_finished)
    cdp.on("Network.loadingFailed", on_failed)
    page.add_init_script(FIRST_SLIDER_JS)
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.goto(f"{base}/{rel}", wait_until="load", timeout=180_000)
    has_state = page.locator('script[type="application/vnd.jupyter.widget-view+json"]').count() > 0
    first_slider = None
    if has_state:
        try:
            page.wait_for_function(
                "() => window.__firstSlider !== undefined", timeout=120_000, polling=250
            )
            first_slider = page.evaluate("() => window.__firstSlider")
        except Exception:  # no slider on this page, or it never became usable
            first_slider = None
    try:
        page.wait_for_load_state("networkidle", timeout=60_000)
    except Exception:
        pass
    page.wait_for_timeout(300)
    first_paint = page.evaluate(
        "() => (performance.getEntriesByName('first-contentful-paint')[0] || {}).startTime ?? null"
    )
    resources = []
    for rid, size in wire.items():
        url, mime = urls.get(rid, (requested.get(rid, "?"), ""))
        if url.startswith(("data:", "blob:")):
            continue
        resources.append(
            {
                "url": url.split("?")[0].removeprefix(base + "/"),
                "type": mime,
                "wire": size,
                "body": body.get(rid, 0),
            }
        )
    resources.sort(key=lambda r: -r["wire"])
    result = {
        "page": rel,
        "profile": profile,
        "requests": len(resources),
        "transfer": sum(r["wire"] for r in resources),
        "uncompressed": sum(r["body"] for r in resources),
        "first_paint_ms": first_paint,
        "first_slider_ms": first_slider,
        "has_widgets": has_state,
        "refused": refused,
        "page_errors": errors,
        "resources": resources,
        "sliders": [],
    }
    if latency:
        cdp.detach()
        count = page.locator(".widget-slider").count()
        for i in range(count):
            if page.locator(".widget-slider").nth(i).locator(".noUi-handle").count():
                result["sliders"].append(measure_slider(page, i))
    context.close()
    return result


def measure_slider(page, i: int) -> dict:
    slider = page.locator(".widget-slider").nth(i)
    handle = slider.locator(".noUi-handle").first
    label = slider.locator(".widget-label").first
    name = (label.inner_text() if label.count() else "") or f"slider {i}"
    handle.scroll_into_view_if_needed()
    out = {"slider": name}
    for kind in ("keyboard", "mouse"):
        out[kind] = moves(page, i, handle, slider, kind)
    return out


def moves(page, i: int, handle, slider, kind: str) -> dict:
    paint, dom, load, missed, blank = [], [], [], 0, 0
    if kind == "keyboard":
        handle.focus()
    for _ in range(MOVES):
        now = float(handle.get_attribute("aria-valuenow") or 0)
        low = float(handle.get_attribute("aria-valuemin") or 0)
        top = float(handle.get_attribute("aria-valuemax") or 0)
        if top == low:
            break  # a one-frame slider cannot move
        step = -1 if now >= top else 1
        page.evaluate(WATCH_JS, [i, kind])  # installs the watcher, returns at once
        if kind == "keyboard":
            page.keyboard.press("ArrowLeft" if step < 0 else "ArrowRight")
        else:  # a click on the track where the next value sits (noUiSlider's "tap")
            box = slider.locator(".noUi-target").first.bounding_box()
            x = (now + step - low) / (top - low) * box["width"]
            x = min(max(x, 1.0), box["width"] - 1.0)  # the track's very ends are not in it
            page.mouse.click(box["x"] + x, box["y"] + box["height"] / 2)
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
        # noUiSlider ignores a tap while it animates the last one (300 ms)
        page.wait_for_timeout(50 if kind == "keyboard" else 400)
    return {
        "moves": len(paint),
        "missed": missed,
        "blank_paints": blank,
        "median_ms": statistics.median(paint) if paint else None,
        "max_ms": max(paint) if paint else None,
        "dom_median_ms": statistics.median(dom) if dom else None,
        "load_median_ms": statistics.median(load) if load else None,
        "samples_ms": [round(x, 2) for x in paint],
    }


def verdict(ok: bool) -> str:
    return "OK" if ok else "OVER BUDGET"


def ms(value) -> str:
    return f"{value / 1000:6.2f}s" if value is not None else "      -"


def page_misses(r: dict) -> list[str]:
    """The budgets this page's figures miss (throttled phone and HTML size)."""
    missed = []
    if r["html_bytes"] > HTML_BUDGET:
        missed.append("HTML size")
    if r["profile"] == "phone":
        if r["transfer"] > TRANSFER_BUDGET:
            missed.append("transfer")
        if r["has_widgets"] and (
            r["first_slider_ms"] is None or r["first_slider_ms"] > FIRST_SLIDER_BUDGET
        ):
            missed.append("first usable slider")
    if r["refused"]:
        missed.append("offline")
    return missed


def slider_misses(s: dict) -> list[str]:
    missed = []
    for kind in ("keyboard", "mouse"):
        m = s[kind]
        if not m["moves"] or m["missed"] or m["median_ms"] > LATENCY_BUDGET:
            missed.append(kind)
    return missed


def report(results: list[dict], composition: dict, detail: bool) -> list[str]:
    """Print the tables; return the budgets missed."""
    over = []
    print(
        "\nHTML of each page (saved widget state against the rest; budget: HTML under "
        f"{HTML_BUDGET / 1e6:.1f} MB)"
    )
    print(
        f"{'page':40} {'HTML':>9} {'gzip':>9} {'state':>9} {'gzip':>9} {'state%':>6} "
        f"{'rest':>9} {'gzip':>9}  verdict"
    )
    for rel, c in composition.items():
        share = c["state_bytes"] / c["html_bytes"] * 100
        print(
            f"{rel:40} {c['html_bytes'] / 1e6:7.3f}MB {c['html_gzip'] / 1e6:7.3f}MB "
            f"{c['state_bytes'] / 1e6:7.3f}MB {c['state_gzip'] / 1e6:7.3f}MB {share:5.0f}% "
            f"{c['rest_bytes'] / 1e6:7.3f}MB {c['rest_gzip'] / 1e6:7.3f}MB  "
            f"{verdict(c['html_bytes'] <= HTML_BUDGET)}"
        )
        if c["html_bytes"] > HTML_BUDGET:
            over.append(f"{rel}: HTML size")
    for profile in ("phone", "desktop"):
        rows = [r for r in results if r["profile"] == profile]
        if not rows:
            continue
        if profile == "phone":
            print(
                f"\nThrottled phone (390x844 @3x, CPU /{CPU_SLOWDOWN}, "
                f"{NETWORK['downloadThroughput'] * 8 / 1e6:.0f} Mbit/s down, "
                f"{NETWORK['uploadThroughput'] * 8 / 1e6:.1f} up, {NETWORK['latency']} ms); "
                f"budgets: transfer <= {TRANSFER_BUDGET / 1e6:.1f} MB compressed, "
                f"first usable slider <= {FIRST_SLIDER_BUDGET / 1e3:.0f} s"
            )
        else:
            print(
                "\nDesktop, unthrottled (1200x900): the same figures, no budget but HTML "
                "size and slider latency"
            )
        print(
            f"{'page':40} {'transfer':>9} {'unzipped':>9} {'reqs':>4} {'paint':>7} "
            f"{'slider':>7}  verdict"
        )
        for r in rows:
            missed = page_misses(r) if profile == "phone" else (["offline"] if r["refused"] else [])
            over += [f"{r['page']} ({profile}): {m}" for m in missed]
            print(
                f"{r['page']:40} {r['transfer'] / 1e6:7.3f}MB {r['uncompressed'] / 1e6:7.3f}MB"
                f" {r['requests']:4d} {ms(r['first_paint_ms'])} {ms(r['first_slider_ms'])}  "
                + (verdict(not missed) + (f" ({', '.join(missed)})" if missed else ""))
            )
            for url in r["refused"]:
                print(f"    request left 127.0.0.1 (refused): {url}")
            for err in r["page_errors"]:
                print(f"    page error: {err}")
            if detail:
                for res in r["resources"]:
                    print(
                        f"      {res['wire'] / 1e3:9.1f} kB wire {res['body'] / 1e3:9.1f} kB "
                        f"body  {res['url']}"
                    )
    sliders = [(r["page"], s) for r in results for s in r["sliders"]]
    if sliders or any(r["profile"] == "desktop" for r in results):
        print(
            f"\nSlider move -> new frame painted, desktop (budget: median <= "
            f"{LATENCY_BUDGET:.0f} ms by keyboard and by mouse, {MOVES} moves each)"
        )
    for page, s in sliders:
        missed = slider_misses(s)
        over += [f"{page} [{s['slider']}]: {m} latency" for m in missed]
        parts = []
        for kind in ("keyboard", "mouse"):
            m = s[kind]
            parts.append(
                f"{kind} median {m['median_ms']:.1f} max {m['max_ms']:.1f} ms "
                f"({m['moves']} moves, {m['missed']} missed, {m['blank_paints']} blank)"
                if m["moves"]
                else f"{kind}: no frame change seen"
            )
        print(
            f"  {page} [{s['slider']}]: {'; '.join(parts)}  "
            + (verdict(not missed) + (f" ({', '.join(missed)})" if missed else ""))
        )
    refused = sum(len(r["refused"]) for r in results)
    print(
        f"\nSummary: {len(composition)} pages, {len(sliders)} sliders, {refused} requests "
        "left 127.0.0.1; "
        + (f"OVER BUDGET ({len(over)}): " + "; ".join(over) if over else "all within budget")
    )
    return over


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--site", type=Path, default=ROOT / "_build" / "html")
    parser.add_argument("--only", choices=["phone", "desktop"], help="one profile only")
    parser.add_argument("--pages", default="*", help="glob of pages (e.g. 'chapters/*')")
    parser.add_argument("--no-latency", action="store_true", help="skip the slider moves")
    parser.add_argument("--detail", action="store_true", help="list every page's resources")
    parser.add_argument("--json", type=Path, help="also write the figures to this JSON file")
    args = parser.parse_args(argv)
    site = args.site.resolve()
    if not (site / "index.html").is_file():
        print(f"error: no built site in {site}: run make book first", file=sys.stderr)
        return 2
    pages = [
        p for p in html_pages(site) if fnmatch.fnmatch(p.relative_to(site).as_posix(), args.pages)
    ]
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        print(
            "error: playwright is not installed: run make book first (it installs the venv)",
            file=sys.stderr,
        )
        return 2
    profiles = [args.only] if args.only else ["phone", "desktop"]
    server = serve(site)
    base = f"http://127.0.0.1:{server.server_port}"
    print(
        f"Serving {site} at {base} (text gzipped, as GitHub Pages); {len(pages)} pages; "
        f"profiles: {', '.join(profiles)}"
    )
    composition = {p.relative_to(site).as_posix(): html_composition(p) for p in pages}
    results = []
    try:
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path="/usr/bin/chromium", args=CHROMIUM_ARGS)
            for profile in profiles:
                for path in pages:
                    rel = path.relative_to(site).as_posix()
                    r = measure_page(
                        browser,
                        base,
                        rel,
                        profile,
                        latency=profile == "desktop" and not args.no_latency,
                    )
                    r["html_bytes"] = composition[rel]["html_bytes"]
                    results.append(r)
                    print(f"  measured {rel} ({profile})", file=sys.stderr, flush=True)
            browser.close()
    finally:
        server.shutdown()
    over = report(results, composition, args.detail)
    if args.json:
        args.json.write_text(
            json.dumps(
                {
                    "budgets": {
                        "html_bytes": HTML_BUDGET,
                        "transfer_bytes": TRANSFER_BUDGET,
                        "first_slider_ms": FIRST_SLIDER_BUDGET,
                        "latency_ms": LATENCY_BUDGET,
                    },
                    "composition": composition,
                    "pages": results,
                    "over_budget": over,
                },
                indent=2,
            )
        )
        print(f"wrote {args.json}")
    return 1 if over else 0


if __name__ == "__main__":
    sys.exit(main())
