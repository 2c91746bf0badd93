"""A matplotlib figure as a frame of a live figure: PNG bytes, their size on screen, a
``data:`` URL and alt text, and the check that its text is legible on a phone.

On a phone the book shows every figure at its natural size (one CSS pixel per pixel of a
static figure's PNG; a frame says its CSS size, its PNG holding :data:`PIXEL_RATIO` pixels
per CSS pixel) and lets a wide one scroll inside its own box (``book/assets/phone.css``), so
a label drawn at ``s`` points into a figure shown at ``dpi`` CSS pixels per inch is
``s * dpi / 72`` CSS pixels tall there. :data:`MIN_TEXT_PX` is the smallest size the book
allows: :func:`figure_to_png` refuses a frame with smaller text, and
``benchmarks/figures.py`` measures every figure of the book with :func:`drawn_font_sizes`.
Only text that is actually drawn counts: a tick label outside the axis limits or an empty
string is never drawn and never measured.
"""

from __future__ import annotations

import base64
import io

import matplotlib.pyplot as plt
from PIL import Image

from helpers.checks import check_real
from helpers.figures.fonts import drawn_font_sizes
from helpers.figures.language import phrase

__all__ = [
    "DEFAULT_DPI",
    "MIN_TEXT_PX",
    "PIXEL_RATIO",
    "css_size",
    "drawn_font_sizes",
    "figure_to_png",
    "figure_words",
    "panel_columns",
    "png_data_url",
    "smallest_text_px",
    "split_png",
]

#: CSS pixels per inch a frame is shown at: a 4.4-inch heatmap is 352 CSS px wide, and
#: 10-point text is 11 CSS px tall (at least :data:`MIN_TEXT_PX`).
DEFAULT_DPI = 80
#: PNG pixels per CSS pixel of a live figure's frames: 2, so they stay sharp on high-density
#: screens (phones, laptops) for about 2.2 times the bytes of a 1x frame.
PIXEL_RATIO = 2

#: The smallest text, in CSS pixels, a figure of the book may show on a phone.
MIN_TEXT_PX = 9.0


def smallest_text_px(fig, dpi: float | None = None) -> float:
    """The height of ``fig``'s smallest drawn text, in pixels of a PNG saved at ``dpi``.

    Args:
        fig: a matplotlib figure (it is drawn once, into memory; it stays open).
        dpi: the resolution the figure is saved at; by default the figure's own.

    Returns:
        ``min(font size in points) * dpi / 72``, or ``inf`` when the figure draws no text.
    """
    dpi = fig.dpi if dpi is None else check_real(dpi, "dpi", minimum=0, exclusive_minimum=True)
    with drawn_font_sizes() as sizes:
        fig.savefig(io.BytesIO(), format="png", dpi=dpi)
    return min(sizes, default=float("inf")) * dpi / 72


def figure_to_png(
    fig, *, dpi: float = DEFAULT_DPI, pixel_ratio: int = 1, colors: int = 256
) -> bytes:
    """Render ``fig`` to PNG bytes, quantised to a ``colors`` palette, and close it.

    ``dpi`` is the resolution the figure is *shown* at, in CSS pixels per inch; the PNG holds
    ``pixel_ratio`` pixels per CSS pixel (2 for high-density screens), i.e. it is saved at
    ``dpi * pixel_ratio``. Show it at its size divided by ``pixel_ratio``.

    Raises ValueError (the figure closed) when its smallest text would be under
    :data:`MIN_TEXT_PX` CSS pixels at ``dpi``.

    The same figure gives the same bytes on every run: matplotlib's ``Software`` metadata
    is dropped and Pillow writes no timestamp.
    """
    if not 2 <= colors <= 256:
        plt.close(fig)
        raise ValueError(f"colors must be between 2 and 256, got {colors}")
    if isinstance(pixel_ratio, bool) or pixel_ratio not in (1, 2, 3):
        plt.close(fig)
        raise ValueError(f"pixel_ratio must be 1, 2 or 3, got {pixel_ratio!r}")
    raw = io.BytesIO()
    with drawn_font_sizes() as sizes:
        fig.savefig(raw, format="png", dpi=dpi * pixel_ratio, metadata={"Software": None})
    plt.close(fig)
    smallest = min(sizes, default=float("inf")) * dpi / 72
    if smallest < MIN_TEXT_PX:
        raise ValueError(
            f"the figure's smallest text is {smallest:.1f} px at dpi={dpi} ({min(sizes):g} pt); "
            f"a frame needs at least {MIN_TEXT_PX:g} px to be readable on a phone, where it is "
            f"shown at its natural size: raise the font size or the dpi"
        )
    raw.seek(0)
    with Image.open(raw) as image:
        paletted = image.convert("RGB").quantize(
            colors=colors, method=Image.Quantize.MEDIANCUT, dither=Image.Dither.NONE
        )
    out = io.BytesIO()
    paletted.save(out, format="PNG", optimize=True)
    return out.getvalue()


def css_size(png: bytes, pixel_ratio: int) -> tuple[int, int]:
    """The (width, height) in CSS pixels a frame of ``pixel_ratio`` is shown at."""
    with Image.open(io.BytesIO(png)) as image:
        width, height = image.size
    return round(width / pixel_ratio), round(height / pixel_ratio)


def png_data_url(png: bytes) -> str:
    """``png`` as a ``data:image/png;base64,...`` URL."""
    return "data:image/png;base64," + base64.b64encode(png).decode("ascii")


def figure_words(fig) -> str:
    """What ``fig`` shows, in its own words, for alt text: its titles and axis labels.

    E.g. ``"attention weights (queries against keys)"``; panels are joined with "; ".
    Colour bars are left out.
    """
    parts = []
    suptitle = fig.get_suptitle() if hasattr(fig, "get_suptitle") else ""
    if suptitle:
        parts.append(suptitle)
    for ax in fig.axes:
        if ax.get_label() == "<colorbar>":
            continue
        title = " ".join(
            t for t in (ax.get_title("left"), ax.get_title(), ax.get_title("right")) if t
        )
        xlabel, ylabel = ax.get_xlabel(), ax.get_ylabel()
        axes = phrase("{} against {}", ylabel, xlabel) if xlabel and ylabel else xlabel or ylabel
        text = (
            phrase("{} ({})", title or phrase("a plot"), axes)
            if axes
            else title or phrase("a plot")
        )
        parts.append(text.replace("$", "").replace("\\", ""))
    return phrase("; ").join(parts) or phrase("a figure")


def panel_columns(fig) -> list[float]:
    """Where ``fig`` can be cut into side-by-side panels, as fractions of its width.

    Returns ``[0, c_1, ..., 1]``: each cut lies in the middle of a gap between columns of
    axes, measured with everything an axes draws (tick labels, titles, legends); a colour
    bar stays with the panel nearest to it, and no figure-level text (suptitle, figure
    legend, ``fig.text``) may cross a cut. ``[0.0, 1.0]`` when the figure has one column.
    A figure closed by :func:`figure_to_png` is measured on a fresh Agg canvas.
    """
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    canvas = fig.canvas if hasattr(fig.canvas, "get_renderer") else FigureCanvasAgg(fig)
    renderer = canvas.get_renderer()
    width = fig.bbox.width
    spans, bars = [], []
    for ax in fig.axes:
        box = ax.get_tightbbox(renderer) if ax.get_visible() else None
        if box is None or box.width <= 0:
            continue
        span = [max(box.x0 / width, 0.0), min(box.x1 / width, 1.0)]
        (bars if ax.get_label() == "<colorbar>" else spans).append(span)
    for bar in bars:  # a colour bar joins the panel nearest to it
        if spans:
            near = min(spans, key=lambda s: min(abs(bar[0] - s[1]), abs(s[0] - bar[1])))
            near[0], near[1] = min(near[0], bar[0]), max(near[1], bar[1])
    columns: list[list[float]] = []
    for x0, x1 in sorted(spans):
        if columns and x0 < columns[-1][1]:
            columns[-1][1] = max(columns[-1][1], x1)
        else:
            columns.append([x0, x1])
    cuts = [(left[1] + right[0]) / 2 for left, right in zip(columns, columns[1:])]
    figure_level = [*fig.legends, *fig.texts]
    figure_level += [getattr(fig, name, None) for name in ("_suptitle", "_supxlabel", "_supylabel")]
    for artist in figure_level:
        if artist is None or not artist.get_visible():
            continue
        if hasattr(artist, "get_text") and not artist.get_text():
            continue
        box = artist.get_window_extent(renderer)
        cuts = [c for c in cuts if not box.x0 / width < c < box.x1 / width]
    return [0.0, *(float(c) for c in cuts), 1.0]


def split_png(png: bytes, columns: list[float], pixel_ratio: int = 1) -> list[bytes]:
    """``png`` cut into vertical strips at ``columns`` (fractions of its width, as
    :func:`panel_columns` gives them): one PNG per panel, left to right, each a whole number
    of CSS pixels wide (cut at multiples of ``pixel_ratio``). ``[png]`` for one column."""
    if len(columns) <= 2:
        return [png]
    with Image.open(io.BytesIO(png)) as image:
        image.load()
        width, height = image.size
        edges = sorted({round(c * width / pixel_ratio) * pixel_ratio for c in columns})
        edges[0], edges[-1] = 0, width
        pieces = []
        for left, right in zip(edges, edges[1:]):
            if right <= left:
                continue
            out = io.BytesIO()
            image.crop((left, 0, right, height)).save(out, format="PNG", optimize=True)
            pieces.append(out.getvalue())
    return pieces
