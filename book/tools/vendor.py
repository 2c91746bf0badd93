"""Copy the site's JavaScript assets from node_modules (filled by ``npm ci``) to book/vendor.

Sphinx copies book/vendor into ``_build/html/_static`` (it is listed in html_static_path),
so the built site serves the widget manager and MathJax 3 itself and needs no CDN.
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
MODULES = ROOT / "node_modules"
VENDOR = ROOT / "book" / "vendor"

# (source under node_modules, destination under book/vendor, glob patterns to skip)
ASSETS = [
    ("@jupyter-widgets/html-manager/dist", "html-manager",
     ["*.map", "embed-amd.js", "libembed-amd.js", "*.LICENSE.txt"]),
    ("mathjax/es5", "mathjax",
     ["*svg*", "mml-*", "tex-mml-*", "tex-chtml-full*", "node-main.js", "latest.js", "sre"]),
]


def main() -> int:
    missing = [src for src, _, _ in ASSETS if not (MODULES / src).is_dir()]
    if missing:
        print(f"error: {', '.join(missing)} not found under node_modules: run `npm ci` first",
              file=sys.stderr)
        return 1
    for src, dest, skip in ASSETS:
        target = VENDOR / dest
        if target.exists():
            shutil.rmtree(target)
        shutil.copytree(MODULES / src, target, ignore=shutil.ignore_patterns(*skip))
    files = sum(1 for p in VENDOR.rglob("*") if p.is_file())
    print(f"vendored {files} asset files into {VENDOR.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
