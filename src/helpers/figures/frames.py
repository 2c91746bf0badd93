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

__all__ = [
    "DEFAULT_DPI",
    "MIN_TEXT_PX",
    "PIXEL_RATIO",
    "css_size",
    "drawn_font_sizes",
    "figure_to_png",
    "figure_words",
    "png_data_url",
    "smallest_text_px",
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
        axes = f"{ylabel} against {xlabel}" if xlabel and ylabel else (xlabel or ylabel)
        text = " ".join(w for w in (title or "a plot", f"({axes})" if axes else "") if w)
        parts.append(text.replace("$", "").replace("\\", ""))
    return "; ".join(parts) or "a figure"
