"""Execute chapter notebooks in place with nbclient, saving outputs and widget state.

JupyterLab does not save widget state by default, so a notebook saved from Lab renders blank
widgets in the book. Run ``make execute`` (this script) before committing a chapter.

    .venv/bin/python book/tools/execute.py [chapters/NN_name.ipynb ...]   # default: every chapter + intro

An English notebook's Chinese twin (locales/zh_CN/notebooks, book/tools/zh_notebooks.py) is
written afresh and executed after it, its figures in Chinese (its first cell sets
``BOOK_LANG=zh_CN``; src/helpers/figures/language.py). A figure text the Chinese catalog lacks
stops the run with the text named, and that notebook is not written. Notebooks run side by side,
one per core.

A re-execution that changes nothing rewrites nothing, so a commit's diff holds only the change:

- widget model ids are derived from the id of the cell that created the widget and the
  widget's place among that cell's widgets (the kernel makes random ones);
- consecutive pieces of one stream (stdout, stderr) are joined into one output, however the
  kernel happened to split them;
- a PNG (an output's picture, or a frame inside the widget state) whose pixels equal those of a
  PNG already in the notebook keeps the old bytes;
- the kernel talks over a local socket (IPC), with no "running over TCP" warning.

Each static figure (an output's ``image/png`` that matplotlib drew) gets its smallest text,
in CSS px at its natural size (one PNG pixel per CSS pixel), in the output's metadata:
``{"book": {"smallest_text_px": 9.03}}`` (``None``: it draws no text). The kernel records the
size of every text it draws into every PNG, by the PNG's SHA-256 (the name MyST-NB gives the
image in ``_images/``), so tests/test_browser.py can check the text a desktop reader sees when
the column scales a figure down. Live frames carry theirs on the ``<img>``
(``helpers.figures.widgets``). A figure of side-by-side panels also gets where it can be cut
between them (``helpers.figures.frames.panel_columns``, mapped to the PNG, which holds the
figure's tight bounding box): ``{"book": {"smallest_text_px": 12.5, "panels": [0, 0.52,
1]}}``; book/_ext/figure_panels.py shows it as one image per panel.
"""

from __future__ import annotations

import base64
import hashlib
import io
import json
import os
import re
import sys
import tempfile
import time
from pathlib import Path

try:
    import nbformat
    from nbclient import NotebookClient
    from nbformat import NotebookNode
    from PIL import Image
    from traitlets.config import Config
except ModuleNotFoundError as missing:  # system python: say which python to use
    sys.exit(
        f"error: {missing.name} is not installed for {sys.executable}: run "
        "`make execute NOTEBOOKS=...` or `.venv/bin/python book/tools/execute.py ...`"
    )

ROOT = Path(__file__).resolve().parents[2]
TIMEOUT_PER_CELL = 300
WIDGET_STATE = "application/vnd.jupyter.widget-state+json"
WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
WIDGET_REF = re.compile(r"IPY_MODEL_([0-9a-f]{32})")
PNG_BASE64 = re.compile(r"iVBORw0KGgo[A-Za-z0-9+/]*={0,2}")  # base64 of the PNG signature
#: Where an output's smallest text is recorded: ``output.metadata[TEXT_KEY]["smallest_text_px"]``.
TEXT_KEY = "book"
# Run in the kernel before the notebook (IPKernelApp.exec_files): every PNG matplotlib draws
# into memory (Jupyter's inline display does) appends {"sha256", "px", "columns"} to the file
# RECORD: its smallest text, and where it can be cut into side-by-side panels
# (helpers.figures.frames.panel_columns), as fractions of the PNG's width (the inline display
# saves the figure's tight bounding box plus a pad, not the whole figure).
TEXT_RECORDER = r"""
import hashlib as _hashlib, json as _json
import matplotlib as _mpl, matplotlib.backend_bases as _mbb
from helpers.figures.fonts import drawn_font_sizes as _drawn
from helpers.figures.frames import panel_columns as _panel_columns

def _book_png_columns(figure, kwargs):
    columns = _panel_columns(figure)
    width = figure.get_figwidth()
    x0, x1 = 0.0, width
    if kwargs.get("bbox_inches") == "tight":
        pad = kwargs.get("pad_inches")
        pad = _mpl.rcParams["savefig.pad_inches"] if pad in (None, "layout") else float(pad)
        box = figure.get_tightbbox(figure.canvas.get_renderer())
        x0, x1 = box.x0 - pad, box.x1 + pad
    inner = [(c * width - x0) / (x1 - x0) for c in columns[1:-1]]
    return [0.0, *(round(c, 4) for c in inner if 0 < c < 1), 1.0]

def _book_record_text(print_figure, record):
    def recording(self, filename, *args, **kwargs):
        dpi = kwargs.get("dpi", args[0] if args else None)
        dpi = self.figure.dpi if dpi in (None, "figure") else float(dpi)
        with _drawn() as sizes:
            result = print_figure(self, filename, *args, **kwargs)
        png = filename.getvalue() if hasattr(filename, "getvalue") else b""
        if png.startswith(b"\x89PNG"):
            px = round(min(sizes) * dpi / 72, 2) if sizes else None
            columns = _book_png_columns(self.figure, kwargs)
            with open(record, "a") as f:
                f.write(_json.dumps({"sha256": _hashlib.sha256(png).hexdigest(), "px": px,
                                     "columns": columns}))
                f.write("\n")
        return result
    return recording

_mbb.FigureCanvasBase.print_figure = _book_record_text(_mbb.FigureCanvasBase.print_figure, RECORD)
del _book_record_text
"""


def execute(path: Path) -> float:
    """Run ``path`` top to bottom in a fresh kernel, write it back, return seconds taken."""
    before = path.read_text(encoding="utf-8")
    try:
        nb = nbformat.reads(before, as_version=4)
    except nbformat.reader.NotJSONError as error:
        raise SystemExit(f"error: {path} is not valid notebook JSON: {error}") from None
    sockets = tempfile.TemporaryDirectory(prefix="execute-")
    config = Config()
    # Local sockets, no "running over TCP" warning; an absolute path, as the kernel's cwd differs.
    config.KernelManager.transport = "ipc"
    config.KernelManager.ip = os.path.join(sockets.name, "kernel")
    record = os.path.join(sockets.name, "text.jsonl")
    recorder = os.path.join(sockets.name, "record_text.py")
    with open(recorder, "w", encoding="utf-8") as f:
        f.write(f"RECORD = {record!r}\n{TEXT_RECORDER}")
    created: list[tuple[str, NotebookNode, list[str]]] = []
    seen: set[str] = set()

    def note_new_widgets(cell, cell_index, **_):
        new = [model for model in client.widget_state if model not in seen]
        seen.update(new)
        created.append((cell.get("id") or str(cell_index), cell, new))

    # The figures' language: English unless the notebook itself says otherwise (a Chinese
    # notebook's first cell sets BOOK_LANG); a text its catalog lacks is logged here.
    os.environ.pop("BOOK_LANG", None)
    untranslated_log = os.path.join(sockets.name, "untranslated.txt")
    os.environ["BOOK_UNTRANSLATED_LOG"] = untranslated_log
    client = NotebookClient(
        nb,
        config=config,
        kernel_name="python3",
        timeout=TIMEOUT_PER_CELL,
        resources={"metadata": {"path": str(path.parent)}},
        store_widget_state=True,
        record_timing=False,
        on_cell_executed=note_new_widgets,
        extra_arguments=[f"--IPKernelApp.exec_files={recorder}"],
    )
    start = time.perf_counter()
    with sockets:
        client.execute()
        elapsed = time.perf_counter() - start
        text_px = read_text_sizes(record)
        untranslated = read_untranslated(untranslated_log)
    if untranslated:
        raise SystemExit(
            f"error: {path.name} draws figure text that src/helpers/figures/zh_CN.po does not "
            f"translate (notebook not written): {untranslated}"
        )
    for cell in nb.cells:
        if cell.cell_type == "code":
            cell.outputs = join_streams(cell.outputs)
            note_text_sizes(cell.outputs, text_px)
    state = nb.metadata.get("widgets", {}).get(WIDGET_STATE, {}).get("state", {})
    if not state:
        nb.metadata.pop("widgets", None)
    ids = stable_ids(state, created) if state else {}
    # nbformat writes keys sorted: written again once renamed, the state is in the new ids' order
    text = nbformat.writes(nbformat.reads(rename(nbformat.writes(nb), ids), as_version=4))
    after = keep_unchanged_pngs(text + "\n", before)
    if after != before:
        path.write_text(after, encoding="utf-8")
    return elapsed


def read_untranslated(log: str) -> list[str]:
    """The figure texts the kernel found no translation for (helpers.figures.language)."""
    if not os.path.exists(log):
        return []
    with open(log, encoding="utf-8") as f:
        return sorted({json.loads(line) for line in f})


def read_text_sizes(record: str) -> dict[str, dict]:
    """The kernel's record: each PNG's SHA-256 -> {"px": its smallest text in px (None: no
    text), "columns": its panel cuts [0, ..., 1] as fractions of its width}."""
    if not os.path.exists(record):
        return {}
    with open(record, encoding="utf-8") as f:
        return {r["sha256"]: r for r in map(json.loads, f)}


def note_text_sizes(outputs: list, recorded: dict[str, dict]) -> None:
    """Write each static PNG output's smallest text and, for a figure of side-by-side panels,
    where it can be cut (from ``recorded``) into its metadata: ``{"book":
    {"smallest_text_px": 12.5, "panels": [0, 0.52, 1]}}``. An output the kernel did not
    record (not drawn by matplotlib) gets none."""
    for output in outputs:
        data = output.get("data", {})
        if "image/png" not in data or WIDGET_VIEW in data:
            continue
        sha = hashlib.sha256(base64.b64decode(data["image/png"])).hexdigest()
        metadata = output.setdefault("metadata", {})
        if sha in recorded:
            metadata[TEXT_KEY] = {"smallest_text_px": recorded[sha]["px"]}
            if len(recorded[sha].get("columns", [])) > 2:
                metadata[TEXT_KEY]["panels"] = recorded[sha]["columns"]
        else:
            metadata.pop(TEXT_KEY, None)


def widget_id(cell_id: str, number: int) -> str:
    """A model id (32 hex digits, like the kernel's) for the ``number``-th widget of a cell."""
    return hashlib.md5(f"{cell_id}/{number}".encode(), usedforsecurity=False).hexdigest()


def stable_ids(state: dict, created: list[tuple[str, NotebookNode, list[str]]]) -> dict[str, str]:
    """Map each kernel-made model id to one that is the same on every run.

    ``created`` lists, cell by cell, the cell's id, the cell and the models it created. A
    cell's models are numbered in a fixed order, whatever order the kernel's messages came in:
    first those its outputs show, each followed by the models it refers to (depth first), then
    the rest (a jslink, say) in the order of their content.
    """
    names: dict[str, str] = {}

    def refs(model: str) -> list[str]:
        return WIDGET_REF.findall(json.dumps(state.get(model, {}), sort_keys=True))

    def content(model: str) -> str:
        text = json.dumps(state.get(model, {}), sort_keys=True)
        return WIDGET_REF.sub(lambda match: names.get(match.group(1), "?"), text)

    def visit(model: str, cell_key: str, mine: set[str]) -> None:
        if model not in mine or model in names:
            return
        names[model] = widget_id(cell_key, sum(name in mine for name in names))
        for child in refs(model):
            visit(child, cell_key, mine)

    for cell_key, cell, new in created:
        for output in cell.get("outputs", []):
            view = output.get("data", {}).get(WIDGET_VIEW)
            if view:
                visit(view["model_id"], cell_key, set(new))
        while rest := [model for model in new if model not in names]:
            visit(min(rest, key=content), cell_key, set(new))
    return names


def rename(text: str, ids: dict[str, str]) -> str:
    """``text`` with every kernel-made model id replaced by its stable id."""
    if not ids:
        return text
    pattern = re.compile("|".join(re.escape(old) for old in ids))
    return pattern.sub(lambda match: ids[match.group()], text)


def join_streams(outputs: list) -> list:
    """``outputs`` with each run of consecutive same-name stream outputs joined into one."""
    joined: list = []
    for output in outputs:
        previous = joined[-1] if joined else None
        if (
            output.get("output_type") == "stream"
            and previous is not None
            and previous.get("output_type") == "stream"
            and previous.get("name") == output.get("name")
        ):
            previous["text"] = "".join(previous["text"]) + "".join(output["text"])
        else:
            joined.append(output)
    return joined


def _pixels(png: str) -> bytes | None:
    """A digest of a base64 PNG's pixels (mode, size, values), or None if it does not decode."""
    try:
        with Image.open(io.BytesIO(base64.b64decode(png))) as image:
            image.load()
            header = f"{image.mode} {image.size}".encode()
            return hashlib.sha256(header + image.tobytes()).digest()
    except (OSError, ValueError):
        return None


def keep_unchanged_pngs(new: str, old: str) -> str:
    """``new`` with each PNG whose pixels equal a PNG of ``old`` written with ``old``'s bytes.

    Matplotlib may encode the same picture differently from one run to the next; the pixels,
    not the bytes, say whether a figure changed.
    """
    old_pngs = set(PNG_BASE64.findall(old))
    changed = {png for png in PNG_BASE64.findall(new) if png not in old_pngs}
    if not changed:
        return new
    by_pixels = {_pixels(png): png for png in old_pngs}
    by_pixels.pop(None, None)
    keep = {}
    for png in changed:
        same = by_pixels.get(_pixels(png))
        if same is not None:
            keep[png] = same
    if not keep:
        return new
    return PNG_BASE64.sub(lambda match: keep.get(match.group(), match.group()), new)


def _zh_notebooks():
    """book/tools/zh_notebooks.py, which writes the Chinese notebooks from the catalogs."""
    sys.path.insert(0, str(ROOT / "book" / "tools"))
    import zh_notebooks

    return zh_notebooks


def chinese_twins(paths: list[Path]) -> list[Path]:
    """The Chinese notebooks of ``paths`` (locales/zh_CN/notebooks), written afresh from
    today's English notebooks and catalogs; their code is the English code, so their outputs
    are those of the last execution only where the code is unchanged."""
    tool = _zh_notebooks()
    mine = [p.resolve() for p in paths if p.resolve().is_relative_to(ROOT)]
    tool.write_all()
    twins = [tool.NOTEBOOKS / p.relative_to(ROOT) for p in mine]
    return [twin for twin in twins if twin.is_file()]


def main(argv: list[str]) -> int:
    """Execute ``argv``'s notebooks (default: every chapter and the introduction) and, for an
    English notebook, its Chinese twin afterwards, with the figures in Chinese; as many at
    once as the machine has cores."""
    from concurrent.futures import ProcessPoolExecutor

    paths = [Path(p).resolve() for p in argv] or [
        *sorted((ROOT / "chapters").glob("*.ipynb")),
        ROOT / "book" / "intro.ipynb",
    ]
    missing = [str(p) for p in paths if not p.is_file()]
    if missing:
        print(f"error: no such notebook: {', '.join(missing)}")
        return 2
    english = [p for p in paths if not p.is_relative_to(_zh_notebooks().NOTEBOOKS)]
    failed = []

    def shown(path: Path) -> Path:
        return path.relative_to(ROOT) if path.is_relative_to(ROOT) else path

    def run(pool, notebooks):
        futures = [(path, pool.submit(execute, path)) for path in notebooks]
        for path, future in futures:
            try:
                print(f"executed {shown(path)} in {future.result():.1f} s", flush=True)
            except SystemExit as error:  # says what and where; the others still run
                failed.append(path)
                print(error, file=sys.stderr, flush=True)
            except Exception as error:
                failed.append(path)
                print(f"error: {shown(path)}: {error}", file=sys.stderr, flush=True)

    with ProcessPoolExecutor(max_workers=min(len(paths), os.cpu_count() or 1)) as pool:
        run(pool, english)
        chinese = [p for p in paths if p not in english]
        if any(p.is_relative_to(ROOT) for p in paths):  # the book's own: its twins, afresh
            chinese += [t for t in chinese_twins(english) if t not in chinese]
        run(pool, chinese)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
