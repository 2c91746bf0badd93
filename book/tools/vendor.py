"""Build the site's JavaScript assets from node_modules (filled by ``npm ci``) into book/vendor.

Sphinx copies book/vendor into ``_build/html/_static`` (it is listed in html_static_path),
so the built site serves them itself and needs no CDN:

* ``widgets/embed.js``: the book's widget manager (``book/tools/widgets/embed.js``), bundled
  and minified with esbuild from ipywidgets 8's own ``@jupyter-widgets/base``,
  ``base-manager`` and ``controls`` packages, its CSS (``book/tools/widgets/widgets.css``)
  inlined. It renders the pages' saved widget state with no kernel; about 0.6 MB (0.17 MB
  gzipped) where @jupyter-widgets/html-manager's embed.js is 1.9 MB (0.46 MB).
* ``mathjax/``: MathJax 3's ES5 components. A page loads ``startup.js``, which loads the
  components ``_config.yml`` lists (TeX input, CHTML output and its fonts, assistive MathML:
  not the 0.4 MB contextual menu that the combined ``tex-chtml.js`` carries).

axe-core (a dev dependency, for the accessibility audit) is read by tests/test_browser.py
straight from node_modules: it is no part of the site.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
MODULES = ROOT / "node_modules"
VENDOR = ROOT / "book" / "vendor"
WIDGETS_SRC = ROOT / "book" / "tools" / "widgets"
ESBUILD = MODULES / ".bin" / "esbuild"

# (source under node_modules, destination under book/vendor, glob patterns to skip)
ASSETS = [
    (
        "mathjax/es5",
        "mathjax",
        # combined components (the book loads single ones), SVG and MathML output, the menu,
        # speech (sre), node-only files
        ["tex-*.js", "mml-*.js", "*svg*", "menu.js", "sre", "sre.js", "node-main.js", "latest.js"],
    ),
]
# Packages the widget bundle is built from (package.json's dependencies).
WIDGET_PACKAGES = [
    "@jupyter-widgets/base",
    "@jupyter-widgets/base-manager",
    "@jupyter-widgets/controls",
    "@lumino/widgets",
    "@lumino/messaging",
]


def esbuild(*args: str) -> None:
    subprocess.run([str(ESBUILD), "--log-level=warning", *args], check=True, cwd=ROOT)


def bundle_widgets(target: Path) -> None:
    """esbuild the CSS, then the JS with that CSS inlined as a string, into ``target``."""
    target.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        css = Path(tmp) / "widgets.css"
        esbuild(str(WIDGETS_SRC / "widgets.css"), "--bundle", "--minify", f"--outfile={css}")
        esbuild(
            str(WIDGETS_SRC / "embed.js"),
            "--bundle",
            "--minify",
            "--format=iife",
            "--target=es2019",
            "--legal-comments=eof",
            "--loader:.css=text",
            f"--alias:widgets-css={css}",
            f"--alias:sanitize-html=./{(WIDGETS_SRC / 'no-sanitize-html.js').relative_to(ROOT)}",
            f"--outfile={target / 'embed.js'}",
        )


def main() -> int:
    needed = [src for src, _, _ in ASSETS] + WIDGET_PACKAGES
    missing = [src for src in needed if not (MODULES / src).is_dir()]
    if missing or not ESBUILD.exists():
        print(
            f"error: {', '.join(missing or ['esbuild'])} not found under node_modules: "
            "run `npm ci` first",
            file=sys.stderr,
        )
        return 1
    if VENDOR.exists():
        shutil.rmtree(VENDOR)
    for src, dest, skip in ASSETS:
        shutil.copytree(MODULES / src, VENDOR / dest, ignore=shutil.ignore_patterns(*skip))
    try:
        bundle_widgets(VENDOR / "widgets")
    except subprocess.CalledProcessError as error:
        print(f"error: esbuild failed bundling the widget manager ({error})", file=sys.stderr)
        return 1
    files = sum(1 for p in VENDOR.rglob("*") if p.is_file())
    size = (VENDOR / "widgets" / "embed.js").stat().st_size
    print(
        f"vendored {files} asset files into {VENDOR.relative_to(ROOT)} "
        f"(widget manager {size / 1e6:.2f} MB)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
