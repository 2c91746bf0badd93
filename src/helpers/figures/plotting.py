"""Plot helpers: attention heatmaps, the multi-head diagram and a classifier's decision
boundary. They return the figure and never call ``plt.show()``.

A helper that creates a figure and then fails closes it before the error propagates, so a
bad call never leaves an open figure behind (matplotlib keeps every open figure alive).
Arguments are checked before any figure is made.
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence

import matplotlib
import matplotlib.pyplot as plt
import numpy as np
import torch
from torch import nn

from helpers.checks import (
    check_instance,
    check_int,
    check_limits,
    check_shape,
    check_tensor,
    describe,
    require,
)
from helpers.tasks.classification import decision_grid

__all__ = ["heatmap", "multihead_diagram", "show_heatmaps", "to_numpy", "plot_decision_boundary"]


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
    """Return ``matrix`` (tensor, array or nested list of real numbers) as a float64 NumPy
    array, detached; ValueError for anything else (strings, ragged lists, complex values)."""
    if isinstance(matrix, torch.Tensor):
        if matrix.is_complex():
            raise ValueError(f"matrix must hold real numbers, got dtype {matrix.dtype}")
        return matrix.detach().cpu().to(torch.float64).numpy()
    if isinstance(matrix, (str, bytes)) or matrix is None:
        raise ValueError(
            f"matrix must be a tensor, an array or a nested list of numbers, got {describe(matrix)}"
        )
    try:
        array = np.asarray(matrix)
        if not np.iscomplexobj(array):
            return array.astype(np.float64)
    except (TypeError, ValueError, RuntimeError):  # RuntimeError: a list of grad tensors
        raise ValueError(
            f"matrix must be a tensor, an array or a nested list of numbers "
            f"(rows of equal length), got {describe(matrix)}"
        ) from None
    raise ValueError(f"matrix must hold real numbers, got {describe(matrix)}")


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
        vmin, vmax: colour limits, finite numbers or None, vmin <= vmax; ``vmax=None``
            takes the matrix maximum.
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
    vmin, vmax = check_limits(vmin, vmax)
    check_instance(ax, matplotlib.axes.Axes, "ax", optional=True)
    require(
        isinstance(fmt, str), f"fmt must be a format string such as '{{:.2f}}', got {describe(fmt)}"
    )
    for labels, size, name in (
        (xticklabels, data.shape[1], "xticklabels: one per column"),
        (yticklabels, data.shape[0], "yticklabels: one per row"),
    ):
        if labels is not None and len(labels) != size:
            raise ValueError(f"{name} ({size}) needed, got {len(labels)} labels")
    created = None
    if ax is None:
        created, ax = plt.subplots(figsize=(4.2, 3.4))
    fig = ax.figure
    with _closed_on_error(created):
        image = ax.imshow(
            data, cmap=cmap, vmin=vmin, vmax=vmax, aspect="auto", interpolation="nearest"
        )
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
                ax.text(
                    j,
                    i,
                    fmt.format(value),
                    ha="center",
                    va="center",
                    fontsize="small",
                    color="black" if value > threshold else "white",
                )
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
                f"grid must be 3-D (C, Q, K) or 4-D (R, C, Q, K), got shape {array.shape}"
            )
        rows = [[array[r, c] for c in range(array.shape[1])] for r in range(array.shape[0])]
    else:
        rows = list(grid)
        if rows and _is_matrix(rows[0]):
            rows = [rows]  # a flat list of matrices: one row
        rows = [[to_numpy(m) for m in row] for row in rows]
    if not rows or not rows[0]:
        raise ValueError("grid must hold at least one matrix")
    for r, row in enumerate(rows):
        for c, m in enumerate(row):
            if m.ndim != 2:
                raise ValueError(
                    f"grid[{r}][{c}] must be a 2-D (Q, K) matrix, got shape {tuple(m.shape)}"
                )
            if m.size == 0:
                raise ValueError(f"grid[{r}][{c}] must not be empty, got shape {m.shape}")
    vmin, vmax = check_limits(vmin, vmax)
    if titles is not None and titles and isinstance(titles[0], str):
        titles = [titles]
    num_rows, num_cols = len(rows), max(len(r) for r in rows)
    if vmax is None:
        vmax = max(float(np.nanmax(m)) for row in rows for m in row)
    figsize = figsize or (2.6 * num_cols + 0.8, 2.4 * num_rows)
    if titles is not None and ([len(t) for t in titles] != [len(row) for row in rows]):
        raise ValueError(
            f"titles must be nested like grid, {[len(row) for row in rows]} per "
            f"row, got {[len(t) for t in titles]}"
        )
    fig, axes = plt.subplots(
        num_rows, num_cols, figsize=figsize, squeeze=False, sharex=True, sharey=True
    )
    with _closed_on_error(fig):
        image = None
        for r, row in enumerate(rows):
            for c in range(num_cols):
                ax = axes[r][c]
                if c >= len(row):
                    ax.axis("off")
                    continue
                image = ax.imshow(
                    row[c], cmap=cmap, vmin=vmin, vmax=vmax, aspect="auto", interpolation="nearest"
                )
                if r == num_rows - 1:
                    ax.set_xlabel(xlabel)
                if c == 0:
                    ax.set_ylabel(ylabel)
                if titles is not None:
                    ax.set_title(titles[r][c])
        fig.colorbar(image, ax=axes, shrink=0.8)
    return fig


def multihead_diagram(
    num_heads: int = 3, ax: matplotlib.axes.Axes | None = None
) -> matplotlib.figure.Figure:
    """Draw multi-head attention as a block diagram, top to bottom: Q, K, V → H heads side
    by side → concat → W^O → output.

    Each of the ``num_heads`` (H) heads is one box holding its own projections
    W_i^Q, W_i^K, W_i^V (D → D/H) and scaled dot-product attention; their (…, D/H)
    outputs meet in the concatenation (…, D), which W^O maps to the (…, D) output. Drawn
    top to bottom, 1.45 in a head, so that three heads fit a phone's column with their
    9-point text at 9 CSS px or more.

    Args:
        num_heads: the number of head boxes drawn, 1 to 8.
        ax: the axes to draw into; a new figure is made when ``None``.

    Returns:
        The matplotlib figure holding ``ax``.
    """
    num_heads = check_int(num_heads, "num_heads", 1)
    require(num_heads <= 8, f"num_heads must be an int from 1 to 8, got {num_heads!r}")
    check_instance(ax, matplotlib.axes.Axes, "ax", optional=True)
    width = max(0.3 + 1.45 * num_heads, 3.2)
    if ax is None:
        fig, ax = plt.subplots(figsize=(width, 5.0))
    fig = ax.figure
    ax.set(xlim=(0, width), ylim=(0, 5.0))
    ax.axis("off")
    centre = width / 2

    def box(x, y, box_width, box_height, text, colour):
        ax.add_patch(
            matplotlib.patches.FancyBboxPatch(
                (x, y),
                box_width,
                box_height,
                boxstyle="round,pad=0.04",
                facecolor=colour,
                edgecolor="0.3",
            )
        )
        ax.text(x + box_width / 2, y + box_height / 2, text, ha="center", va="center", fontsize=9)

    def arrow(start, end, label=None):
        ax.annotate(
            "", xy=end, xytext=start, arrowprops={"arrowstyle": "->", "color": "0.3", "lw": 1.2}
        )
        if label:
            ax.text(
                end[0] + 0.05,
                (start[1] + end[1]) / 2,
                label,
                ha="left",
                va="center",
                fontsize=9,
                color="0.25",
            )

    box(centre - 1.35, 4.3, 2.7, 0.6, "queries Q, keys K, values V\n(…, D)", "#e8e8e8")
    box(0.15, 1.85, width - 0.3, 0.4, "concat (…, D)", "#d6e6f2")
    box(centre - 0.6, 1.0, 1.2, 0.45, "$W^O$: D → D", "#f6dcc0")
    box(centre - 0.6, 0.1, 1.2, 0.5, "output\n(…, D)", "#e8e8e8")
    for i in range(num_heads):
        x = 0.15 + 1.45 * i + (width - 0.3 - 1.45 * num_heads) / 2
        box(
            x + 0.05,
            2.75,
            1.25,
            1.05,
            f"head {i + 1}\n$W_{i + 1}^Q, W_{i + 1}^K, W_{i + 1}^V$\nD → D/H\nattention",
            "#e3f1df",
        )
        arrow((centre, 4.25), (x + 0.675, 3.85))
        arrow((x + 0.675, 2.7), (x + 0.675, 2.3), "(…, D/H)" if i == num_heads - 1 else None)
    arrow((centre, 1.8), (centre, 1.5))
    arrow((centre, 0.95), (centre, 0.65))
    return fig


def plot_decision_boundary(
    model: nn.Module,
    x: torch.Tensor,
    y: torch.Tensor,
    ax: matplotlib.axes.Axes | None = None,
    *,
    resolution: int = 100,
    title: str | None = None,
    colorbar: bool = True,
) -> matplotlib.figure.Figure:
    """Shade P(class 1) over the plane, draw the 0.5 contour and the labelled points.

    Args:
        model: a binary classifier on 2-D inputs (see
            :func:`helpers.tasks.classification.decision_grid`).
        x: points (N, 2), floating, N >= 1; y: labels (N,) in {0, 1} (class 0 white
            circles, class 1 black triangles).
        ax: the axes to draw into; a new figure is made when ``None``.
        resolution: grid points per axis; title: the panel title; colorbar: add one.

    Returns:
        The figure holding ``ax``.
    """
    check_tensor(x, "x", "(N, 2)", floating=True)
    check_shape(x, (None, 2))
    check_tensor(y, "y", "(N,)")
    check_shape(y, (x.shape[0],))
    require(
        not y.is_complex() and bool(((y == 0) | (y == 1)).all()),
        "y must hold the labels 0 and 1 only",
    )
    resolution = check_int(resolution, "resolution", 1)
    check_instance(ax, matplotlib.axes.Axes, "ax", optional=True)
    xx, yy, probs = decision_grid(model, x, resolution)  # checks the model and x
    created = None
    if ax is None:
        created, ax = plt.subplots(figsize=(4.5, 3.6))
    with _closed_on_error(created):
        shading = ax.contourf(
            xx, yy, probs, levels=torch.linspace(0, 1, 11).tolist(), cmap="viridis", alpha=0.75
        )
        if 0 < probs.min() < 0.5 < probs.max():
            ax.contour(xx, yy, probs, levels=[0.5], colors="white", linewidths=2)
        # class 0 lies on the dark end of viridis, class 1 on the bright end
        for label, marker, face, edge in ((0, "o", "white", "black"), (1, "^", "black", "white")):
            points = x[y == label]
            ax.scatter(
                points[:, 0],
                points[:, 1],
                s=16,
                marker=marker,
                c=face,
                edgecolors=edge,
                linewidths=0.5,
                label=f"class {label}",
            )
        ax.set_xlabel("$x_1$")
        ax.set_ylabel("$x_2$")
        if title:
            ax.set_title(title)
        if colorbar:
            ax.figure.colorbar(shading, ax=ax, label="P(class 1)")
    return ax.figure
