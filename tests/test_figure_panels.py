"""book/_ext/figure_panels.py: a static figure's minimum width and its panels, in the page."""

from __future__ import annotations

import base64
import importlib.util
import io
import json
import re
from pathlib import Path

import matplotlib.pyplot as plt
import pytest
from PIL import Image

ROOT = Path(__file__).resolve().parents[1]
spec = importlib.util.spec_from_file_location("_figure_panels", ROOT / "book/_ext/figure_panels.py")
figure_panels = importlib.util.module_from_spec(spec)
spec.loader.exec_module(figure_panels)

pytestmark = pytest.mark.book


def test_min_width_is_where_the_smallest_text_is_9_px():
    assert figure_panels.min_width(550, 13.89) == 357  # 550 * 9 / 13.89 = 356.4, rounded up
    assert figure_panels.min_width(300, 8.0) == 300  # never wider than the figure itself
    assert figure_panels.min_width(550, None) == 0  # no text: any width


class _App:
    def __init__(self, srcdir: Path, outdir: Path):
        self.srcdir, self.outdir = srcdir, outdir
        self.builder = type("Builder", (), {"format": "html"})()


def _png(panels: int) -> bytes:
    fig, axes = plt.subplots(1, panels, figsize=(3 * panels, 2.5), squeeze=False)
    for ax in axes[0]:
        ax.plot([0, 1], [0, 1])
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=100)
    plt.close(fig)
    return buf.getvalue()


def test_a_page_gets_panels_and_minimum_widths(tmp_path):
    import hashlib

    two, one = _png(2), _png(1)
    outputs = [
        {
            "data": {"image/png": base64.b64encode(png).decode()},
            "metadata": {"book": {"smallest_text_px": 13.89, **extra}},
            "output_type": "display_data",
        }
        for png, extra in ((two, {"panels": [0.0, 0.5, 1.0]}), (one, {}))
    ]
    (tmp_path / "chapters").mkdir()
    (tmp_path / "chapters" / "01_x.ipynb").write_text(
        json.dumps({"cells": [{"cell_type": "code", "outputs": outputs, "source": ""}]})
    )
    sha2, sha1 = (hashlib.sha256(p).hexdigest() for p in (two, one))
    body = (
        f'<p>x</p><img alt="Two panels &amp; more" src="../_images/{sha2}.png" />'
        f'<img alt="One panel" src="../_images/{sha1}.png" />'
        '<img alt="a logo" src="../_static/logo.png" />'
    )
    context = {"body": body}
    figure_panels._page_context(
        _App(tmp_path, tmp_path / "out"), "chapters/01_x", "page", context, None
    )
    html = context["body"]
    assert html.startswith("<p>x</p>") and html.endswith(
        '<img alt="a logo" src="../_static/logo.png" />'
    )
    group = re.search(
        r'<div class="figure-panels" role="img" aria-label="Two panels &amp; more">(.*?)</div>',
        html,
    )
    assert group, html
    pieces = re.findall(
        r'src="\.\./_images/([0-9a-f]{64}-\d)\.png" alt="" width="(\d+)"', group.group(1)
    )
    assert [p[0] for p in pieces] == [f"{sha2}-1", f"{sha2}-2"]
    widths = [
        Image.open(tmp_path / "out" / "_images" / f"{name}.png").size[0] for name, _ in pieces
    ]
    assert sum(widths) == Image.open(io.BytesIO(two)).size[0] == 600
    assert [int(w) for _, w in pieces] == widths
    assert f"flex: {widths[0]} 1 {figure_panels.min_width(widths[0], 13.89)}px" in group.group(1)
    single = re.search(rf'<img alt="One panel" src="\.\./_images/{sha1}\.png" ([^>]*)/>', html)
    assert single and 'class="book-figure"' in single.group(1)
    assert f'style="min-width: {figure_panels.min_width(300, 13.89)}px"' in single.group(1)
