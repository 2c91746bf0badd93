"""How large a figure's text comes out on screen, in CSS pixels.

On a phone the book shows every figure at its natural size (one PNG pixel per CSS pixel,
``book/assets/phone.css``) and lets a wide one scroll inside its own box, so a label drawn
at ``s`` points into a PNG of ``dpi`` dots per inch is ``s * dpi / 72`` CSS pixels tall there.
:data:`MIN_TEXT_PX` is the smallest size the book allows; :func:`figure_to_png` in
:mod:`helpers.figures.widgets` refuses a live-figure frame with smaller text.

Only text that is actually drawn counts: a tick label outside the axis limits or an empty
string is never drawn and never measured.
"""

from __future__ import annotations

import contextlib
import io
from typing import Iterator

from matplotlib import text as mtext

from helpers.checks import check_real

__all__ = ["MIN_TEXT_PX", "drawn_font_sizes", "smallest_text_px"]

#: The smallest text, in CSS pixels, a figure of the book may show on a phone.
MIN_TEXT_PX = 9.0


@contextlib.contextmanager
def drawn_font_sizes() -> Iterator[list[float]]:
    """Within the block, record the size in points of every non-empty text matplotlib draws.

    Yields the list the sizes are appended to. Any figure drawn in the block counts (a
    ``savefig``, Jupyter's inline display); matplotlib's ``Text.draw`` is restored after it.
    """
    sizes: list[float] = []
    original = mtext.Text.draw

    def draw(self, renderer):
        if self.get_visible() and self.get_text().strip():
            sizes.append(float(self.get_fontsize()))
        return original(self, renderer)

    mtext.Text.draw = draw
    try:
        yield sizes
    finally:
        mtext.Text.draw = original


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
