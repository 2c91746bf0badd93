"""The smallest text of every figure the chapters draw, in CSS pixels on a phone.

    python benchmarks/figures.py [--json PATH] [chapters/NN_name.ipynb ...]

On a screen narrower than 600 CSS px the book shows every figure, static or live, at its
natural size (one PNG pixel per CSS pixel, ``book/assets/phone.css``; tests/test_browser.py
checks it at 390 px), so a label drawn at ``s`` points into a PNG saved at ``dpi`` is
``s * dpi / 72`` CSS px tall there. Budget: at least 9 px
(:data:`helpers.figures.frames.MIN_TEXT_PX`).

How: each chapter (default: every chapter and the landing page) is run top to bottom in a
fresh kernel with nbclient, on an in-memory copy (the notebook file is never written), with
one extra first cell that records the size of every text matplotlib draws into every PNG
(Jupyter's inline display and the live figures' frames alike, a frame at the CSS resolution
it is shown at, not its PNG's) and lifts the frames' own check so that a small label is
reported here rather than raised. Prints per chapter the
number of static figures and of frames with the smallest label of each kind, then the
figure that holds the smallest label; exit code 1 when a budget is missed.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import nbformat
from common import budget_exit  # benchmarks/common.py (the script's folder is on sys.path)
from nbclient import NotebookClient

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
from helpers.figures.frames import MIN_TEXT_PX  # noqa: E402

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
    _FIGURE_TEXT.append({"cell": _CELL["line"], "frame": css_dpi is not None,
                         "px": min(sizes) * (css_dpi or dpi) / 72 if sizes else None,
                         "title": title})
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
    return json.loads(text)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("notebooks", nargs="*", type=Path)
    parser.add_argument("--json", type=Path, help="also write the records to this file")
    args = parser.parse_args(argv)
    paths = args.notebooks or [
        *sorted((ROOT / "chapters").glob("*.ipynb")),
        ROOT / "book" / "intro.ipynb",
    ]
    print(f"Smallest text per PNG on a phone (natural size), budget >= {MIN_TEXT_PX:g} CSS px")
    print(f"{'notebook':34} {'static':>6} {'smallest':>9} {'frames':>6} {'smallest':>9}  verdict")
    verdicts, everything = [], {}
    for path in paths:
        records = [r for r in measure(path.resolve()) if r["px"] is not None]
        everything[path.name] = records
        row = []
        for frame in (False, True):
            kind = [r for r in records if r["frame"] is frame]
            smallest = min((r["px"] for r in kind), default=None)
            row += [f"{len(kind):6d}", f"{smallest:7.1f}px" if smallest else f"{'-':>9}"]
        smallest = min((r["px"] for r in records), default=float("inf"))
        ok = smallest >= MIN_TEXT_PX - 1e-9
        verdicts.append((f"{path.name} smallest text {smallest:.1f} px", ok))
        print(f"{path.name:34} {' '.join(row)}  {'OK' if ok else 'OVER BUDGET'}")
        small = {}  # (cell, kind, title) -> (count, smallest px)
        for r in records:
            if r["px"] < MIN_TEXT_PX - 1e-9:
                key = (r["cell"], "frames" if r["frame"] else "static")
                count, px = small.get(key, (0, r["px"]))
                small[key] = (count + 1, min(px, r["px"]))
        for (cell, kind), (count, px) in small.items():
            print(f"    {count} {kind} of the cell {cell!r}: {px:.1f} px")
    if everything:
        name, worst = min(
            ((n, r) for n, rs in everything.items() for r in rs), key=lambda item: item[1]["px"]
        )
        print(
            f"smallest on any page: {worst['px']:.1f} px ({name}, "
            f"{'a frame' if worst['frame'] else 'a static figure'} {worst['title']!r} "
            f"of the cell {worst['cell']!r})"
        )
    if args.json:
        args.json.write_text(json.dumps(everything, indent=1))
    return budget_exit(verdicts)


if __name__ == "__main__":
    sys.exit(main())
