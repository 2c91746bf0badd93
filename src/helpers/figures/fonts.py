"""The sizes of the text matplotlib draws, without importing pyplot.

Kept apart from :mod:`helpers.figures.frames` (which imports pyplot) so that
``book/tools/execute.py`` can record every figure's smallest text from the kernel's first
moment, before the kernel has chosen its matplotlib backend.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from matplotlib import text as mtext

__all__ = ["drawn_font_sizes"]


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
