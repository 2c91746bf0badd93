"""Notebook hygiene: every chapter is committed executed, in order, with widget state.

nbval (``make nbval``; ``make test`` compares the outputs as nbval does, in the Colab-like
kernel of tests/test_clients.py) re-executes the chapters and compares their outputs; these tests check what nbval cannot: the saved state the static book renders
from, the bootstrap cell, and the chapter's shape (summary, exercises, hidden solutions).
"""

from __future__ import annotations

import ast
import json
import posixpath
import re
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "book" / "tools"))
import assert_messages  # noqa: E402
import bootstrap  # noqa: E402
import myst_links  # noqa: E402

CHAPTERS = sorted((ROOT / "chapters").glob("*.ipynb"))
# Every executed notebook of the book: the chapters and the landing page.
NOTEBOOKS = CHAPTERS + [ROOT / "book" / "intro.ipynb"]
# With their Chinese twins (committed executed too, figures in Chinese): what their outputs
# must be the English ones' are held to as well.
EXECUTED = NOTEBOOKS + sorted((ROOT / "locales" / "zh_CN" / "notebooks").rglob("*.ipynb"))
WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
WIDGET_STATE = "application/vnd.jupyter.widget-state+json"
# MyST syntax, which only the book renders: JupyterLab, Colab and GitHub's viewer show it raw.
# A role ({term}`...`, {cite:p}`...`, {doc}`...`) or a directive fence (```{...}, :::{...}).
MYST_ROLE = re.compile(r"\{[a-z][\w:.+-]*\}`")
MYST_DIRECTIVE = re.compile(r"^[ \t]*(?:`{3,}|~{3,}|:{3,})[ \t]*\{[^}\n]*\}", re.M)
MARKDOWN_LINK = re.compile(r"\]\(([^()\s]+)\)")


def _load(path: Path) -> dict:
    return json.loads(path.read_text(encoding="utf-8"))


def _source(cell) -> str:
    return "".join(cell["source"]) if isinstance(cell["source"], list) else cell["source"]


def _ids(paths):
    return [("zh/" if "locales" in p.parts else "") + p.name for p in paths]


def test_there_are_chapters():
    assert len(CHAPTERS) >= 2, "expected at least the first two chapters in chapters/"


def test_chapters_are_in_the_toc():
    toc = (ROOT / "_toc.yml").read_text(encoding="utf-8")
    for path in CHAPTERS:
        assert f"chapters/{path.stem}" in toc, f"{path.name} is not listed in _toc.yml"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=_ids(NOTEBOOKS))
def test_first_cell_is_the_bootstrap_cell(path):
    first = _load(path)["cells"][0]
    assert first["cell_type"] == "code", f"{path.name}: the first cell must be the bootstrap cell"
    assert _source(first) == bootstrap.cell_source(), (
        f"{path.name}: bootstrap cell differs from the template with _config.yml's "
        "repository.url; run `python book/tools/bootstrap.py --fix`"
    )
    assert "remove-cell" in first.get("metadata", {}).get("tags", [])


def test_bootstrap_url_is_the_config_url():
    url = bootstrap.repository_url()
    assert url.startswith("https://"), f"repository.url should be an https URL, got {url!r}"
    assert f'BOOK_REPOSITORY = "{url}"' in bootstrap.cell_source()


@pytest.mark.parametrize("path", EXECUTED, ids=_ids(EXECUTED))
def test_executed_top_to_bottom(path):
    code = [c for c in _load(path)["cells"] if c["cell_type"] == "code"]
    counts = [c.get("execution_count") for c in code]
    assert None not in counts, f"{path.name}: some code cells were never executed"
    assert counts == list(range(1, len(code) + 1)), (
        f"{path.name}: cells were not run once each, top to bottom, in a fresh kernel "
        "(run `make execute`)"
    )


@pytest.mark.parametrize("path", EXECUTED, ids=_ids(EXECUTED))
def test_no_errors_or_unstable_text_in_outputs(path):
    for cell in _load(path)["cells"]:
        for out in cell.get("outputs", []):
            assert out["output_type"] != "error", f"{path.name}: an output is an error"
            text = "".join(out.get("text", "")) + "".join(out.get("data", {}).get("text/plain", ""))
            assert not re.search(r"at 0x[0-9a-f]{6,}", text), (
                f"{path.name}: an output prints a memory address: {text[:80]!r}"
            )
            if out.get("name") == "stderr":
                tags = cell.get("metadata", {}).get("tags", [])
                assert "nbval-ignore-output" in tags, (
                    f"{path.name}: stderr output in a cell not tagged nbval-ignore-output: "
                    f"{text[:80]!r}"
                )


@pytest.mark.parametrize("path", EXECUTED, ids=_ids(EXECUTED))
def test_every_widget_view_has_saved_state(path):
    nb = _load(path)
    state = nb.get("metadata", {}).get("widgets", {}).get(WIDGET_STATE, {}).get("state", {})
    views = [
        out["data"][WIDGET_VIEW]["model_id"]
        for cell in nb["cells"]
        for out in cell.get("outputs", [])
        if WIDGET_VIEW in out.get("data", {})
    ]
    assert views, f"{path.name}: no live figure; every chapter (and the landing page) has one"
    missing = [v for v in views if v not in state]
    assert not missing, f"{path.name}: widget views without saved state (blank in the book)"
    kinds = {m["model_name"] for m in state.values()}
    assert {"SelectionSliderModel", "StackModel", "HTMLModel", "LinkModel"} <= kinds, (
        f"{path.name}: live figures must be SelectionSlider + jslink + Stack of HTML frames, "
        f"found {sorted(kinds)}"
    )
    frames = [m["state"]["value"] for m in state.values() if m["model_name"] == "HTMLModel"]
    panels = '<div class="live-panels"><img src="data:image/png;base64,'
    assert all(
        (f.startswith('<img src="data:image/png;base64,') or f.startswith(panels))
        and re.search(r' alt="[^"]+"', f)
        for f in frames
    ), f"{path.name}: every frame is one <img>, or one per panel, with alt text"
    bundles = [
        out["data"]
        for cell in nb["cells"]
        for out in cell.get("outputs", [])
        if WIDGET_VIEW in out.get("data", {})
    ]
    assert all("image/png" in b for b in bundles), (
        f"{path.name}: every live figure's output carries its first frame as image/png, so "
        f"clients without widgets (untrusted, GitHub, nbviewer) show a picture"
    )


@pytest.mark.parametrize("path", EXECUTED, ids=_ids(EXECUTED))
def test_no_progress_bar_text_is_saved(path):
    nb = _load(path)
    texts = [
        "".join(out.get("text", "")) + "".join(out.get("data", {}).get("text/plain", ""))
        for cell in nb["cells"]
        for out in cell.get("outputs", [])
    ]
    state = json.dumps(nb.get("metadata", {}).get("widgets", {}))
    assert not any(re.search(r"\d+%\|", t) for t in texts), f"{path.name}: a progress bar"
    assert "it/s]" not in state and "FloatProgressModel" not in state, (
        f"{path.name}: a progress bar in the saved widget state"
    )


@pytest.mark.parametrize("path", CHAPTERS, ids=_ids(CHAPTERS))
def test_no_interact_and_seeded(path):
    code = "\n".join(_source(c) for c in _load(path)["cells"] if c["cell_type"] == "code")
    assert "interact(" not in code, f"{path.name}: interact() does not work in the static book"
    assert "set_seed(" in code, f"{path.name}: seed the chapter with helpers.seeding.set_seed"


@pytest.mark.parametrize("path", CHAPTERS, ids=_ids(CHAPTERS))
def test_chapter_shape(path):
    cells = _load(path)["cells"]
    markdown = "\n".join(_source(c) for c in cells if c["cell_type"] == "markdown")
    assert re.search(r"^# \d+\. ", markdown, re.M), f"{path.name}: needs a '# N. Title'"
    assert re.search(r"^## Summary", markdown, re.M), f"{path.name}: needs a Summary"
    exercises = markdown.split("## Exercises", 1)
    assert len(exercises) == 2, f"{path.name}: needs an Exercises section"
    assert exercises[1].count("<details") >= 3 and "<summary>" in exercises[1], (
        f"{path.name}: needs at least three exercises with solutions behind a toggle"
    )
    assert exercises[1].count("<details") == exercises[1].count("</details>")


@pytest.mark.parametrize("path", NOTEBOOKS, ids=_ids(NOTEBOOKS))
def test_markdown_has_no_myst_syntax(path):
    for index, cell in enumerate(_load(path)["cells"]):
        if cell["cell_type"] != "markdown":
            continue
        source = _source(cell)
        found = MYST_ROLE.findall(source) + [
            m.group(0).strip() for m in MYST_DIRECTIVE.finditer(source)
        ]
        assert not found, (
            f"{path.name}, cell {index}: MyST syntax {found[:3]} reads raw in Jupyter, Colab and "
            "GitHub; write a plain link (CONTRIBUTING.md, Glossary and Citations) or run "
            "`python book/tools/myst_links.py`, which rewrites roles as links"
        )


@pytest.mark.parametrize("path", NOTEBOOKS, ids=_ids(NOTEBOOKS))
def test_markdown_links_resolve(path):
    """Relative links must name a file of the repository, from the notebook's own folder:
    that is how Jupyter, GitHub and nbviewer follow them."""
    folder = path.parent.relative_to(ROOT).as_posix()
    for cell in _load(path)["cells"]:
        if cell["cell_type"] != "markdown":
            continue
        for url in MARKDOWN_LINK.findall(_source(cell)):
            if re.match(r"^[a-zA-Z][\w+.-]*:|^#", url):
                continue
            target = posixpath.normpath(posixpath.join(folder, url.split("#")[0]))
            assert (ROOT / target).is_file(), (
                f"{path.name}: the link ({url}) points at {target}, which does not exist"
            )


@pytest.mark.parametrize("path", NOTEBOOKS, ids=_ids(NOTEBOOKS))
def test_markdown_links_are_current(path):
    """Citation texts are the book's, the contents list is _toc.yml's, every glossary link
    names a term and every citation a BibTeX key (what `myst_links.py --check` checks)."""
    try:
        old, new = myst_links.convert(path)
    except myst_links.LinkError as error:
        pytest.fail(f"{path.name}: {error}")
    assert old == new, (
        f"{path.name}: links out of date with the glossary, references.bib or _toc.yml; "
        "run `python book/tools/myst_links.py`"
    )


@pytest.mark.parametrize("path", EXECUTED, ids=_ids(EXECUTED))
def test_notebook_size_fits_the_page_budget(path):
    size = path.stat().st_size
    assert size < 2_500_000, f"{path.name} is {size / 1e6:.2f} MB; a page must stay under 2.5 MB"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=_ids(NOTEBOOKS))
def test_checks_say_what_they_got(path):
    """A hidden check that compares computed values carries a message showing them, so a
    reader whose CPU or seed gives another value sees what differed, not a bare
    AssertionError (book/tools/assert_messages.py adds them)."""
    bare = []
    for index, cell in enumerate(_load(path)["cells"]):
        if cell["cell_type"] == "code":
            bare += [
                f"cell {index}, line {node.lineno}: {ast.unparse(node.test)[:70]}"
                for node in assert_messages.asserts_needing_message(_source(cell))
            ]
    assert bare == [], (
        f"{path.name}: asserts without a message (run python "
        f"book/tools/assert_messages.py {path.relative_to(ROOT)}): {bare}"
    )


@pytest.mark.parametrize("path", EXECUTED, ids=_ids(EXECUTED))
def test_static_figures_record_their_text_and_where_their_panels_part(path):
    """Every static figure has its smallest text recorded (book/tools/execute.py), and each
    cut between its panels falls where the PNG is blank from top to bottom: the cuts were
    mapped from the figure to the PNG (which holds the figure's tight bounding box) right."""
    import base64
    import io

    import numpy as np
    from PIL import Image

    for index, cell in enumerate(_load(path)["cells"]):
        for output in cell.get("outputs", []):
            png = output.get("data", {}).get("image/png")
            if not png or WIDGET_VIEW in output.get("data", {}):
                continue
            book = output.get("metadata", {}).get("book", {})
            assert "smallest_text_px" in book, f"cell {index}: re-run book/tools/execute.py"
            cuts = book.get("panels", [0.0, 1.0])
            assert cuts[0] == 0.0 and cuts[-1] == 1.0 and cuts == sorted(cuts), (index, cuts)
            with Image.open(io.BytesIO(base64.b64decode("".join(png)))) as image:
                grey = np.asarray(image.convert("L"))
            for cut in cuts[1:-1]:
                x = round(cut * grey.shape[1])
                band = grey[:, max(x - 1, 0) : x + 2]
                assert (band >= 245).all(), (
                    f"cell {index}: the cut at {cut} (x = {x} of {grey.shape[1]}) crosses "
                    f"something drawn: {int((band < 245).sum())} dark pixels"
                )


@pytest.mark.parametrize("path", EXECUTED, ids=_ids(EXECUTED))
def test_every_static_figure_has_alt_text(path):
    """A screen reader names a figure by its alt text (the cell's ``mystnb.image.alt``);
    without one the page names it by its file, ``../_images/6d14...png``."""
    missing = []
    for index, cell in enumerate(_load(path)["cells"]):
        outputs = cell.get("outputs", [])
        pictures = [o for o in outputs if "image/png" in o.get("data", {})]
        if not pictures or all(WIDGET_VIEW in o.get("data", {}) for o in pictures):
            continue  # a live figure's frames carry their own alt texts
        alt = cell.get("metadata", {}).get("mystnb", {}).get("image", {}).get("alt", "")
        if len(alt.split()) < 6:
            missing.append(f"cell {index}: {_source(cell).splitlines()[0][:60]!r}")
    assert not missing, (
        'figures without alt text (a header `# %% mystnb={"image": {"alt": "..."}}` in '
        f"the twin): {missing}"
    )
