"""The smallest text of every figure the chapters draw, in CSS pixels on a phone and on a
desktop.

    python benchmarks/figures.py [--json PATH] [chapters/NN_name.ipynb ...]

On a screen narrower than 600 CSS px the book shows every figure, static or live, at its
natural size (one PNG pixel per CSS pixel, ``book/assets/phone.css``; tests/test_browser.py
checks it at 390 px), so a label drawn at ``s`` points into a PNG saved at ``dpi`` is
``s * dpi / 72`` CSS px tall there. On a desktop (1280 x 900) the article's column is
:data:`DESKTOP_COLUMN` px wide (a live figure's frames :data:`DESKTOP_FRAME_COLUMN`): a
wider figure is scaled down to fit, and its text with it, to
``natural * min(1, column / width)``. Budget: at least 9 px on both
(:data:`helpers.figures.frames.MIN_TEXT_PX`); tests/test_browser.py checks the desktop in
the built site, from the sizes book/tools/execute.py records (``--recorded`` reads those
sizes from the executed notebooks instead of running them).

How: each chapter (default: every chapter and the landing page) is run top to bottom in a
fresh kernel with nbclient, on an in-memory copy (the notebook file is never written), with
one extra first cell that records the size of every text matplotlib draws into every PNG
(Jupyter's inline display and the live figures' frames alike, a frame at the CSS resolution
it is shown at, not its PNG's) and lifts the frames' own check so that a small label is
reported here rather than raised. Prints per chapter the
number of static figures and of frames with the smallest label of each kind, on a phone and
on a desktop, every figure under budget on either, then the figure that holds the smallest
label; exit code 1 when a budget is missed.
"""

from __future__ import annotations

import argparse
import base64
import html
import json
import math
import re
import sys
from pathlib import Path

import nbformat
from common import budget_exit  # benchmarks/common.py (the script's folder is on sys.path)
from nbclient import NotebookClient

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
from helpers.figures.frames import MIN_TEXT_PX  # noqa: E402

#: CSS px of the article's column at 1280 x 900 (sphinx-book-theme, with the page's table of
#: contents at the right): where a static figure is shown.
DESKTOP_COLUMN = 688.0
#: CSS px a live figure's frame may take there (the widget's box, a little inside the column).
DESKTOP_FRAME_COLUMN = 684.0
WIDGET_STATE = "application/vnd.jupyter.widget-state+json"
WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"

RECORDER = r"""
import sys as _sys
import matplotlib.backend_bases as _mbb
import helpers.figures.frames as _frames
from helpers.figures.frames import drawn_font_sizes as _drawn
_frames.MIN_TEXT_PX = 0.0  # report small text here instead of raising in figure_to_png
_FIGURE_TEXT, _CELL = [], {"line": ""}
def _note_cell(info):  # the first line of the cell that draws, to say where a figure is
    _CELL["line"] = next((l for l in info.raw_cell.splitlines() if l.strip()), "")[:60]
get_ipython().events.register("pre_run_cell", _note_cell)
def _css_dpi():
    # A live figure's frame: the CSS resolution figure_to_png was asked for (its PNG holds
    # pixel_ratio pixels per CSS pixel). None for any other figure (a static one).
    frame = _sys._getframe(2)
    while frame is not None and frame.f_code.co_name != "figure_to_png":
        frame = frame.f_back
    return None if frame is None else float(frame.f_locals["dpi"])
_print_figure = _mbb.FigureCanvasBase.print_figure
def _recording_print_figure(self, filename, *args, **kwargs):
    dpi = kwargs.get("dpi", args[0] if args else None)
    dpi = self.figure.dpi if dpi in (None, "figure") else float(dpi)
    with _drawn() as sizes:
        result = _print_figure(self, filename, *args, **kwargs)
    css_dpi = _css_dpi()
    title = (self.figure.get_suptitle() or next((a.get_title() for a in self.figure.axes
                                                if a.get_title()), "")) if sizes else ""
    png = filename.getvalue() if hasattr(filename, "getvalue") else b""
    width = (int.from_bytes(png[16:20], "big") * (css_dpi or dpi) / dpi
             if png.startswith(b"\x89PNG") else None)  # CSS px shown at its natural size
    _FIGURE_TEXT.append({"cell": _CELL["line"], "frame": css_dpi is not None,
                         "px": min(sizes) * (css_dpi or dpi) / 72 if sizes else None,
                         "title": title, "width": width})
    return result
_mbb.FigureCanvasBase.print_figure = _recording_print_figure
"""
REPORT = "import json as _json; print(_json.dumps(_FIGURE_TEXT))"


def measure(path: Path) -> list[dict]:
    """Run ``path`` with the recorder; return one record per PNG drawn."""
    nb = nbformat.read(path, as_version=4)
    nb.cells.insert(0, nbformat.v4.new_code_cell(RECORDER))
    nb.cells.append(nbformat.v4.new_code_cell(REPORT))
    NotebookClient(
        nb, timeout=300, kernel_name="python3", resources={"metadata": {"path": str(path.parent)}}
    ).execute()
    text = "".join(o.get("text", "") for o in nb.cells[-1].outputs if o.get("name") == "stdout")
    return [dict(r, desktop_px=desktop_px(r)) for r in json.loads(text)]


def recorded(path: Path) -> list[dict]:
    """The records of ``path`` as it was last executed, with no kernel: the smallest text
    book/tools/execute.py wrote into each static figure's output metadata and
    helpers.figures.widgets onto each live frame (``data-text-px``), with the PNG's width.
    A figure with no recorded size gets ``"px": nan`` (a failure: execute the notebook)."""
    nb = json.loads(path.read_text(encoding="utf-8"))
    records = []
    for cell in nb["cells"]:
        lines = [line for line in "".join(cell.get("source", "")).splitlines() if line.strip()]
        for output in cell.get("outputs", []):
            data = output.get("data", {})
            if "image/png" not in data or WIDGET_VIEW in data:
                continue
            png = base64.b64decode("".join(data["image/png"]))
            book = output.get("metadata", {}).get("book", {})
            px = book["smallest_text_px"] if "smallest_text_px" in book else math.nan
            records.append(
                {
                    "cell": (lines or [""])[0][:60],
                    "frame": False,
                    "px": px,
                    "title": "",
                    "width": int.from_bytes(png[16:20], "big"),
                }
            )
    state = nb["metadata"].get("widgets", {}).get(WIDGET_STATE, {}).get("state", {})
    for model in state.values():
        value = model.get("state", {}).get("value")
        if not (isinstance(value, str) and "live-frame" in value):
            continue
        text = re.search(r'data-text-px="([^"]*)"', value)
        alt = html.unescape(re.search(r'alt="([^"]*)"', value).group(1))
        px = math.nan if text is None else None if text.group(1) == "none" else float(text.group(1))
        records.append(
            {
                "cell": alt[:60],
                "frame": True,
                "px": px,
                "title": alt,
                # a frame of side-by-side panels is one <img> per panel: they shrink
                # together on a desktop, as the one figure they were drawn as
                "width": float(sum(map(int, re.findall(r'<img [^>]*?width="(\d+)"', value)))),
                "panels": [int(w) for w in re.findall(r'<img [^>]*?width="(\d+)"', value)],
            }
        )
    return [dict(r, desktop_px=desktop_px(r)) for r in records]


def desktop_px(record: dict) -> float | None:
    """The record's smallest text, in CSS px, as a 1280 px desktop shows its figure: scaled
    down with the figure when it is wider than its column."""
    if record["px"] is None or record["width"] is None:
        return record["px"]
    column = DESKTOP_FRAME_COLUMN if record["frame"] else DESKTOP_COLUMN
    return record["px"] * min(1.0, column / record["width"])


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("notebooks", nargs="*", type=Path)
    parser.add_argument("--json", type=Path, help="also write the records to this file")
    parser.add_argument(
        "--recorded",
        action="store_true",
        help="read the sizes the last execution recorded in the notebooks (book/tools/"
        "execute.py), as tests/test_browser.py does, instead of running them (seconds)",
    )
    args = parser.parse_args(argv)
    paths = args.notebooks or [
        *sorted((ROOT / "chapters").glob("*.ipynb")),
        ROOT / "book" / "intro.ipynb",
    ]
    print(
        f"Smallest text per PNG on a phone (natural size) and on a 1280 px desktop, "
        f"budget >= {MIN_TEXT_PX:g} CSS px"
    )
    print(
        f"{'notebook':34} {'static':>6} {'phone':>7} {'desktop':>7} "
        f"{'frames':>6} {'phone':>7} {'desktop':>7}  verdict"
    )
    verdicts, everything = [], {}
    for path in paths:
        found = recorded(path) if args.recorded else measure(path.resolve())
        records = [r for r in found if r["px"] is not None]
        missing = [r for r in records if math.isnan(r["px"])]
        if missing:
            verdicts.append((f"{path.name}: {len(missing)} figures with no recorded size", False))
            print(f"{path.name}: {len(missing)} figures with no recorded text size: execute it")
        records = [r for r in records if not math.isnan(r["px"])]
        everything[path.name] = records
        row = []
        for frame in (False, True):
            kind = [r for r in records if r["frame"] is frame]
            row.append(f"{len(kind):6d}")
            for key in ("px", "desktop_px"):
                smallest = min((r[key] for r in kind), default=None)
                row.append(f"{smallest:5.1f}px" if smallest else f"{'-':>7}")
        ok = {}
        for key, where in (("px", "phone"), ("desktop_px", "desktop")):
            smallest = min((r[key] for r in records), default=float("inf"))
            ok[key] = smallest >= MIN_TEXT_PX - 1e-9
            verdicts.append((f"{path.name} smallest text on a {where} {smallest:.1f} px", ok[key]))
        verdict = "OK" if all(ok.values()) else "OVER BUDGET"
        print(f"{path.name:34} {' '.join(row)}  {verdict}")
        small = {}  # (cell, kind) -> (count, smallest px on a phone, on a desktop, widest)
        for r in records:
            if min(r["px"], r["desktop_px"]) < MIN_TEXT_PX - 1e-9:
                key = (r["cell"], "frames" if r["frame"] else "static")
                count, px, desk, wide = small.get(key, (0, r["px"], r["desktop_px"], 0.0))
                small[key] = (
                    count + 1,
                    min(px, r["px"]),
                    min(desk, r["desktop_px"]),
                    max(wide, r["width"] or 0.0),
                )
        for (cell, kind), (count, px, desk, wide) in small.items():
            print(
                f"    {count} {kind} of the cell {cell!r}: {px:.1f} px on a phone, "
                f"{desk:.1f} px on a desktop ({wide:.0f} px wide)"
            )
    if everything:
        for key, where in (("px", "a phone"), ("desktop_px", "a desktop")):
            name, worst = min(
                ((n, r) for n, rs in everything.items() for r in rs), key=lambda item: item[1][key]
            )
            print(
                f"smallest on {where}: {worst[key]:.1f} px ({name}, "
                f"{'a frame' if worst['frame'] else 'a static figure'} {worst['title']!r} "
                f"of the cell {worst['cell']!r})"
            )
    if args.json:
        args.json.write_text(json.dumps(everything, indent=1))
    return budget_exit(verdicts)


if __name__ == "__main__":
    sys.exit(main())
