"""Sphinx extension: keep the built book fully offline and its console free of errors.

1. Removes sphinx-thebe's hooks. Jupyter Book 1 always loads sphinx-thebe, which declares
   ``const THEBE_JS_URL`` once per build pass (a console SyntaxError on the second
   declaration) and points at a CDN. The book has no live kernel, so thebe is switched off.
2. Adds a small shim for the MathJax 2 call ``MathJax.Hub.Queue`` that ipywidgets makes
   when it renders a widget label; Sphinx ships MathJax 3, which has no ``Hub``.
3. Fails the build if a vendored asset it needs (``npm ci`` + book/tools/vendor.py) is absent.
"""

from __future__ import annotations

from pathlib import Path

from sphinx.application import Sphinx
from sphinx.errors import ExtensionError

HERE = Path(__file__).resolve().parent
REQUIRED = ["widgets/embed.js", "mathjax/startup.js"]


def _drop_thebe(app: Sphinx) -> None:
    registry = app.registry
    registry.css_files[:] = [f for f in registry.css_files if "thebe" not in str(f[0])]
    registry.js_files[:] = [f for f in registry.js_files if "thebe" not in str(f[0])]
    for listeners in app.events.listeners.values():
        listeners[:] = [
            listener
            for listener in listeners
            if not getattr(listener.handler, "__module__", "").startswith("sphinx_thebe")
        ]


def _check_assets(app: Sphinx) -> None:
    vendor = Path(app.confdir) / "book" / "vendor"
    missing = [name for name in REQUIRED if not (vendor / name).is_file()]
    if missing:
        raise ExtensionError(
            f"vendored JS assets missing ({', '.join(missing)}): run `make book` "
            "(npm ci, then python book/tools/vendor.py)"
        )


def setup(app: Sphinx) -> dict:
    _drop_thebe(app)
    app.connect("builder-inited", _check_assets)
    app.connect("builder-inited", _drop_thebe, priority=900)
    # after the inline `window.MathJax = {...}` config (priority 500), before MathJax runs (defer)
    app.add_js_file("mathjax2-shim.js", priority=510)
    return {"version": "1.0", "parallel_read_safe": True, "parallel_write_safe": True}
