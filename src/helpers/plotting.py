"""Plot helpers: attention heatmaps. They return the figure and never call ``plt.show()``."""

from __future__ import annotations

from typing import Sequence

import matplotlib

import matplotlib.pyplot as plt
import numpy as np
import torch

__all__ = ["heatmap", "show_heatmaps", "to_numpy"]


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
    if ax is None:
        fig, ax = plt.subplots(figsize=(4.2, 3.4))
    fig = ax.figure
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
    fig, axes = plt.subplots(num_rows, num_cols, figsize=figsize, squeeze=False,
                             sharex=True, sharey=True)
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
