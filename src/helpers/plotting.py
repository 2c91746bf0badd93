"""Plot helpers: attention heatmaps. They return the figure and never call ``plt.show()``.

A helper that creates a figure and then fails closes it before the error propagates, so a
bad call never leaves an open figure behind (matplotlib keeps every open figure alive).
"""

from __future__ import annotations

import contextlib
from typing import Sequence

import matplotlib

import matplotlib.pyplot as plt
import numpy as np
import torch

__all__ = ["heatmap", "multihead_diagram", "show_heatmaps", "to_numpy"]


@contextlib.contextmanager
def _closed_on_error(fig):
    """Close ``fig`` (if not None: a figure this helper created) when the body raises."""
    try:
        yield
    except BaseException:
        if fig is not None:
            plt.close(fig)
        raise


def to_numpy(matrix) -> np.ndarray:
    """Return ``matrix`` (tensor, array or nested list) as a float NumPy array, detached."""
    if isinstance(matrix, torch.Tensor):
        return matrix.detach().cpu().to(torch.float64).numpy()
    return np.asarray(matrix, dtype=np.float64)


def _is_matrix(item) -> bool:
    """True if ``item`` is one 2-D matrix (not a row of matrices, which may be ragged)."""
    try:
        return to_numpy(item).ndim == 2
    except (ValueError, TypeError):  # a row of matrices of different shapes
        return False


def heatmap(
    matrix,
    ax: matplotlib.axes.Axes | None = None,
    *,
    xlabel: str = "keys",
    ylabel: str = "queries",
    title: str | None = None,
    cmap: str = "viridis",
    vmin: float | None = 0.0,
    vmax: float | None = None,
    colorbar: bool = True,
    xticklabels: Sequence[str] | None = None,
    yticklabels: Sequence[str] | None = None,
    annotate: bool = False,
    fmt: str = "{:.2f}",
) -> matplotlib.figure.Figure:
    """Draw one (Q, K) matrix, usually attention weights, as a heatmap.

    Args:
        matrix: a 2-D tensor or array of shape (Q, K); rows are queries, columns keys.
        ax: the axes to draw into; a new figure is made when ``None``.
        xlabel, ylabel, title: axis labels and title.
        cmap: a perceptually uniform colormap name (``viridis`` by default).
        vmin, vmax: colour limits; ``vmax=None`` takes the matrix maximum.
        colorbar: add a colour bar.
        xticklabels, yticklabels: optional tick labels (one per column / row).
        annotate: write each value in its cell (for small matrices).
        fmt: format of the annotations.

    Returns:
        The matplotlib figure holding ``ax``.
    """
    data = to_numpy(matrix)
    if data.ndim != 2:
        raise ValueError(f"matrix must be 2-D (Q, K), got shape {tuple(data.shape)}")
    for labels, size, name in ((xticklabels, data.shape[1], "xticklabels: one per column"),
                               (yticklabels, data.shape[0], "yticklabels: one per row")):
        if labels is not None and len(labels) != size:
            raise ValueError(f"{name} ({size}) needed, got {len(labels)} labels")
    created = None
    if ax is None:
        created, ax = plt.subplots(figsize=(4.2, 3.4))
    fig = ax.figure
    with _closed_on_error(created):
        image = ax.imshow(data, cmap=cmap, vmin=vmin, vmax=vmax, aspect="auto",
                          interpolation="nearest")
        ax.set_xlabel(xlabel)
        ax.set_ylabel(ylabel)
        if title:
            ax.set_title(title)
        if xticklabels is not None:
            ax.set_xticks(range(len(xticklabels)), labels=list(xticklabels))
        if yticklabels is not None:
            ax.set_yticks(range(len(yticklabels)), labels=list(yticklabels))
        if annotate:
            threshold = (np.nanmax(data) + np.nanmin(data)) / 2
            for (i, j), value in np.ndenumerate(data):
                ax.text(j, i, fmt.format(value), ha="center", va="center", fontsize=8,
                        color="black" if value > threshold else "white")
        if colorbar:
            fig.colorbar(image, ax=ax, shrink=0.85)
    return fig


def show_heatmaps(
    grid,
    *,
    titles: Sequence[Sequence[str]] | Sequence[str] | None = None,
    xlabel: str = "keys",
    ylabel: str = "queries",
    cmap: str = "viridis",
    vmin: float | None = 0.0,
    vmax: float | None = None,
    figsize: tuple[float, float] | None = None,
) -> matplotlib.figure.Figure:
    """Draw a grid of heatmaps sharing one colour scale and one colour bar.

    Args:
        grid: a 4-D tensor/array (R, C, Q, K), a 3-D one (C, Q, K) drawn as one row,
            or a nested list of 2-D matrices (rows of columns).
        titles: per-panel titles, nested like ``grid`` (or flat for a single row).
        xlabel, ylabel: labels, put on the bottom row and the left column only.
        cmap, vmin, vmax: colour settings shared by every panel; ``vmax=None`` takes the
            largest value in the grid.
        figsize: the figure size; chosen from the grid size when ``None``.

    Returns:
        The figure.
    """
    if isinstance(grid, (torch.Tensor, np.ndarray)):
        array = to_numpy(grid)
        if array.ndim == 3:
            array = array[None]
        if array.ndim != 4:
            raise ValueError(
                f"grid must be 3-D (C, Q, K) or 4-D (R, C, Q, K), got shape {array.shape}")
        rows = [[array[r, c] for c in range(array.shape[1])] for r in range(array.shape[0])]
    else:
        rows = list(grid)
        if rows and _is_matrix(rows[0]):
            rows = [rows]  # a flat list of matrices: one row
        rows = [[to_numpy(m) for m in row] for row in rows]
    if not rows or not rows[0]:
        raise ValueError("grid must hold at least one matrix")
    if titles is not None and titles and isinstance(titles[0], str):
        titles = [titles]
    num_rows, num_cols = len(rows), max(len(r) for r in rows)
    if vmax is None:
        vmax = max(float(np.nanmax(m)) for row in rows for m in row)
    figsize = figsize or (2.6 * num_cols + 0.8, 2.4 * num_rows)
    if titles is not None and ([len(t) for t in titles] != [len(row) for row in rows]):
        raise ValueError(f"titles must be nested like grid, {[len(row) for row in rows]} per "
                         f"row, got {[len(t) for t in titles]}")
    fig, axes = plt.subplots(num_rows, num_cols, figsize=figsize, squeeze=False,
                             sharex=True, sharey=True)
    with _closed_on_error(fig):
        image = None
        for r, row in enumerate(rows):
            for c in range(num_cols):
                ax = axes[r][c]
                if c >= len(row):
                    ax.axis("off")
                    continue
                image = ax.imshow(row[c], cmap=cmap, vmin=vmin, vmax=vmax, aspect="auto",
                                  interpolation="nearest")
                if r == num_rows - 1:
                    ax.set_xlabel(xlabel)
                if c == 0:
                    ax.set_ylabel(ylabel)
                if titles is not None:
                    ax.set_title(titles[r][c])
        fig.colorbar(image, ax=axes, shrink=0.8)
    return fig


def multihead_diagram(num_heads: int = 3, ax: matplotlib.axes.Axes | None = None
                      ) -> matplotlib.figure.Figure:
    """Draw multi-head attention as a block diagram: Q, K, V → H heads → concat → W^O.

    Each of the ``num_heads`` (H) heads is one box holding its own projections
    W_i^Q, W_i^K, W_i^V (D → D/H) and scaled dot-product attention; their (…, D/H)
    outputs meet in the concatenation (…, D), which W^O maps to the (…, D) output.

    Args:
        num_heads: the number of head boxes drawn, 1 to 8.
        ax: the axes to draw into; a new figure is made when ``None``.

    Returns:
        The matplotlib figure holding ``ax``.
    """
    if isinstance(num_heads, bool) or not isinstance(num_heads, int) or not 1 <= num_heads <= 8:
        raise ValueError(f"num_heads must be an int from 1 to 8, got {num_heads!r}")
    if ax is None:
        fig, ax = plt.subplots(figsize=(9.0, 0.4 + 0.75 * num_heads))
    fig = ax.figure
    height = 1.2 * num_heads
    ax.set(xlim=(0, 11.0), ylim=(-0.05, height + 0.05))
    ax.axis("off")

    def box(x, y, width, box_height, text, colour):
        ax.add_patch(matplotlib.patches.FancyBboxPatch(
            (x, y), width, box_height, boxstyle="round,pad=0.04", facecolor=colour,
            edgecolor="0.3"))
        ax.text(x + width / 2, y + box_height / 2, text, ha="center", va="center", fontsize=8)

    def arrow(start, end, label=None):
        ax.annotate("", xy=end, xytext=start,
                    arrowprops={"arrowstyle": "->", "color": "0.3", "lw": 1.2})
        if label:
            ax.text((start[0] + end[0]) / 2, (start[1] + end[1]) / 2 + 0.08, label,
                    ha="center", va="bottom", fontsize=7, color="0.25")

    middle = height / 2
    box(0.1, middle - 0.5, 1.5, 1.0, "queries Q\nkeys K\nvalues V\n(…, D)", "#e8e8e8")
    box(6.75, 0.15, 1.0, height - 0.3, "concat\n(…, D)", "#d6e6f2")
    box(8.3, middle - 0.35, 0.9, 0.7, "$W^O$\nD → D", "#f6dcc0")
    box(9.75, middle - 0.35, 1.0, 0.7, "output\n(…, D)", "#e8e8e8")
    for i in range(num_heads):
        y = height - 1.2 * (i + 1) + 0.2
        box(2.3, y, 3.5, 0.8, f"head {i + 1}: $W_{i + 1}^Q, W_{i + 1}^K, W_{i + 1}^V$ (D → D/H)"
            "\nscaled dot-product attention", "#e3f1df")
        arrow((1.65, middle), (2.25, y + 0.4))
        arrow((5.85, y + 0.4), (6.7, y + 0.4), "(…, D/H)")
    arrow((7.8, middle), (8.25, middle))
    arrow((9.25, middle), (9.7, middle))
    return fig
